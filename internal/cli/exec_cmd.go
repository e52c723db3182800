package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

func (a *app) execCmd() *cobra.Command {
	var requester, stdinFile string
	var uploadFiles []string
	cmd := &cobra.Command{
		Use:   "exec LEASE_ID -- TOOL [ARGS...]",
		Short: "Run simctl or adb against a leased device on the daemon's machine, streaming its output",
		Long: `Run simctl (iOS) or adb (Android) against the device of a lease, on the machine
that owns it, and exit with the command's exit code. Works against a remote
daemon too. There is no terminal: a bare "adb shell" is refused; pass the
command to run ("adb shell getprop"). {udid}, {deviceSet}, {serial} and {leaseId}
in the arguments become the lease's values, as in simlock run ("simlock exec L --
simctl getenv {udid} HOME"). --stdin sends a file (or - for standard
input) to the command in one piece. --upload FILE (repeatable) first streams a
local file to the lease's scratch directory on that machine; an argument
{upload:NAME} (NAME the file's base name) becomes its path there, so
"simlock exec L --upload app.apk -- adb install {upload:app.apk}" installs a
local APK on a remote device. Uploads are deleted when the lease ends.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer c.Close()
			in := contract.DeviceExecIn{LeaseID: args[0], Tool: args[1], Args: args[2:], RequesterID: requester}
			if in.Args == nil {
				in.Args = []string{}
			}
			if in.RequesterID == "" {
				in.RequesterID = a.env.Getenv("SIMLOCK_REQUESTER")
			}
			if in.RequesterID == "" {
				// The local operator acts for the lease holder, and a
				// person for any lease of theirs: each of their `simlock
				// lease` processes asked under its own requester id.
				hello := c.Hello()
				if l, err := client.Do(cmd.Context(), c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: args[0]}); err == nil &&
					(hello.Role == contract.RoleAdmin || l.OwnerID == hello.Principal) {
					in.RequesterID = l.RequesterID
				}
			}
			for _, file := range uploadFiles {
				if err := uploadFile(cmd.Context(), c, args[0], file); err != nil {
					return err
				}
			}
			if stdinFile != "" {
				var r io.Reader = a.env.Stdin
				if stdinFile != "-" {
					f, err := os.Open(stdinFile)
					if err != nil {
						return err
					}
					defer f.Close()
					r = f
				}
				b, err := io.ReadAll(r)
				if err != nil {
					return err
				}
				in.Stdin = string(b)
			}
			out, err := c.Exec(cmd.Context(), in, func(o contract.ExecOutput) {
				if o.Stream == "stderr" {
					io.WriteString(a.env.Stderr, o.Chunk)
				} else {
					io.WriteString(a.env.Stdout, o.Chunk)
				}
			})
			if err != nil {
				return err
			}
			if out.ExitCode != 0 {
				return exitError{out.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&requester, "requester", "", "the lease's requester id (default $SIMLOCK_REQUESTER, else the lease's own when it is yours or you are admin)")
	cmd.Flags().StringArrayVar(&uploadFiles, "upload", nil, "a local file to upload first, named {upload:BASENAME} in the arguments (repeatable)")
	cmd.Flags().StringVar(&stdinFile, "stdin", "", "file to send as the command's standard input (- for this process's)")
	a.addJSON(cmd)
	return cmd
}

// uploadFile streams one local file to the lease under its base name.
func uploadFile(ctx context.Context, c *client.Client, leaseID, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := c.Upload(ctx, leaseID, filepath.Base(file), f); err != nil {
		return fmt.Errorf("upload %s: %w", file, err)
	}
	return nil
}
