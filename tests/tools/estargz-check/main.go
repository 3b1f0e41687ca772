// estargz-check reads a layer blob with the stargz snapshotter's own estargz package (Debian's
// golang-github-containerd-stargz-snapshotter-dev), as the snapshotter does before it mounts a
// layer: the footer, the TOC (checked against the digest the manifest's annotation names), and
// every chunk of every file read through the TOC's offsets and checked against its digest.
// It prints one line per file and exits non-zero on the first thing the snapshotter would refuse.
//
// usage: estargz-check BLOB TOC-DIGEST
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/containerd/stargz-snapshotter/estargz"
	digest "github.com/opencontainers/go-digest"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "estargz-check: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: estargz-check BLOB TOC-DIGEST")
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	st, err := f.Stat()
	if err != nil {
		fail("%v", err)
	}
	r, err := estargz.Open(io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		fail("open: %v", err)
	}
	want, err := digest.Parse(os.Args[2])
	if err != nil {
		fail("toc digest: %v", err)
	}
	verifiers, err := r.VerifyTOC(want)
	if err != nil {
		fail("verify toc: %v", err)
	}
	root, ok := r.Lookup("")
	if !ok {
		fail("no root in the TOC")
	}
	files := 0
	var walk func(dir string, e *estargz.TOCEntry)
	walk = func(dir string, e *estargz.TOCEntry) {
		e.ForeachChild(func(base string, child *estargz.TOCEntry) bool {
			name := base
			if dir != "" {
				name = dir + "/" + base
			}
			switch child.Type {
			case "dir":
				walk(name, child)
			case "reg":
				check(r, verifiers, name, child)
				files++
			}
			return true
		})
	}
	walk("", root)
	landmark := "none"
	if _, ok := r.Lookup(estargz.PrefetchLandmark); ok {
		landmark = estargz.PrefetchLandmark
	} else if _, ok := r.Lookup(estargz.NoPrefetchLandmark); ok {
		landmark = estargz.NoPrefetchLandmark
	}
	fmt.Printf("ok %d files, landmark %s\n", files, landmark)
}

// check reads the file chunk by chunk through the TOC, as the snapshotter's reader does, and
// checks each chunk against the TOC's chunk digest and the whole against the file's digest.
func check(r *estargz.Reader, verifiers estargz.TOCEntryVerifier, name string, e *estargz.TOCEntry) {
	sr, err := r.OpenFile(name)
	if err != nil {
		fail("%s: %v", name, err)
	}
	whole := sha256.New()
	var off int64
	for off < e.Size {
		ce, ok := r.ChunkEntryForOffset(name, off)
		if !ok {
			fail("%s: no chunk at %d", name, off)
		}
		buf := make([]byte, ce.ChunkSize)
		if _, err := sr.ReadAt(buf, ce.ChunkOffset); err != nil && err != io.EOF {
			fail("%s: read chunk at %d: %v", name, ce.ChunkOffset, err)
		}
		v, err := verifiers.Verifier(ce)
		if err != nil {
			fail("%s: %v", name, err)
		}
		v.Write(buf)
		if !v.Verified() {
			fail("%s: chunk at %d does not match its digest", name, ce.ChunkOffset)
		}
		whole.Write(buf)
		off = ce.ChunkOffset + ce.ChunkSize
	}
	if e.Size > 0 {
		if got := fmt.Sprintf("sha256:%x", whole.Sum(nil)); got != e.Digest {
			fail("%s: content %s, the TOC says %s", name, got, e.Digest)
		}
	}
	fmt.Printf("%s %d\n", name, e.Size)
}
