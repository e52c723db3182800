// Package arch holds no code: its tests enforce the package boundaries
// described in docs/architecture.md, so a forbidden import fails CI instead
// of relying on review.
package arch
