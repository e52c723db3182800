// Package docstest holds no code: its tests hold the reference docs to the
// code, both ways. Every error code of the contract's table is in the user
// guide's and the protocol's code tables with the table's exit code, kind
// and retryability, and no other code is; every configuration key of
// config.Default is in the user guide's configuration table and no other
// key is; every command of the CLI's cobra tree is in docs/cli.md and no
// other command is; and every sh block of README.md and docs/*.md runs, as
// written, against a real daemon on the simulated SDK, or is excused by name
// with its reason.
package docstest
