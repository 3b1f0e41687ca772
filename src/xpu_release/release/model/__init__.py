"""What a release is, as every command asks it: its plan (which refs at which endpoints), the line
rule (which floating tags it takes), the pool of endpoints it is served from and what they serve,
whether it is withdrawn, and its typed record and re-scan history."""
