// Command gen writes the contract's JSON Schemas into contract/schema.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/simlock/simlock/contract"
)

func main() {
	dir := "schema"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, b := range contract.OperationSchemas() {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
