// The version, in this one file: `--version`, the start line and the state file say it; the Makefile, the packages
// and the man pages read it from here (scripts/version.sh). scripts/deb/changelog's first entry must name it too.
public let beacondVersion = "0.3.0"
