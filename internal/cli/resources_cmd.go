package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/simlock/simlock/contract"
)

func (a *app) resourcesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resources",
		Short: "Observe and tune a leased device's resource groups (animations, widgets, indexing, ...)",
		Long: `Observe and tune the background services of a leased device by logical group.
Every answer is evidence from an independent read of the device: a group is
enabled or disabled only when every service in it was observed so; otherwise
it is unsupported or unknown. Tuning (set, reconcile) needs resources.enabled in
the daemon config, or a lease requested with --resources.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.resourcesGetCmd(), a.resourcesSetCmd(), a.resourcesReconcileCmd(), a.resourcesGroupsCmd())
	return cmd
}

func (a *app) resourcesGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get LEASE_ID",
		Short: "Show the observed state of every resource group of a leased device",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A lease means a daemon runs: never start one to read.
			c, err := a.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.ResourcesGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printResources(res)
		},
	}
	a.addJSON(cmd)
	return cmd
}

func (a *app) resourcesSetCmd() *cobra.Command {
	var restore string
	var timeoutMs int64
	cmd := &cobra.Command{
		Use:   "set LEASE_ID GROUP=enabled|disabled... | set LEASE_ID --restore FILE",
		Short: "Enable or disable resource groups on a leased device, verified by a re-read",
		Long: `Enable or disable resource groups on a leased device; groups not named are left
alone. The answer is what an independent read observed afterwards; success is
true only when every named group was observed as asked. On Android the answer
carries a restore receipt: save it (--json) and pass the file to --restore to
undo exactly what was changed, on the same device and boot only.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := contract.ResourcesSetIn{LeaseID: args[0], TimeoutMs: timeoutMs}
			switch {
			case restore != "" && len(args) > 1:
				return contract.Errorf(contract.CodeBadRequest, "pass either GROUP=STATE pairs or --restore, not both")
			case restore != "":
				r, err := readReceipt(restore)
				if err != nil {
					return err
				}
				in.Restore = r
			default:
				m, err := parseResourceMap(args[1:])
				if err != nil {
					return err
				}
				in.Resources = m
			}
			c, err := a.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.ResourcesSet(cmd.Context(), in)
			if err != nil {
				return err
			}
			if err := a.printResources(res); err != nil {
				return err
			}
			return unproven(res)
		},
	}
	cmd.Flags().StringVar(&restore, "restore", "", "a file holding an Android answer (or just its restore receipt) to undo")
	cmd.Flags().Int64Var(&timeoutMs, "timeout-ms", 0, "deadline for the whole call (default 300000)")
	a.addJSON(cmd)
	return cmd
}

func (a *app) resourcesReconcileCmd() *cobra.Command {
	var in contract.ResourcesReconcileIn
	cmd := &cobra.Command{
		Use:   "reconcile LEASE_ID GROUP=enabled|disabled...",
		Short: "Compare a resource map with the device's observed state as typed drift; --repair fixes it",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseResourceMap(args[1:])
			if err != nil {
				return err
			}
			in.LeaseID, in.Resources = args[0], m
			c, err := a.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.ResourcesReconcile(cmd.Context(), in)
			if err != nil {
				return err
			}
			if err := a.printResources(res); err != nil {
				return err
			}
			return unproven(res)
		},
	}
	cmd.Flags().BoolVar(&in.Repair, "repair", false, "re-apply the drifted groups, then observe again")
	cmd.Flags().BoolVar(&in.ReleaseOwnedExtras, "release-owned-extras", false, "also undo what simlock wrote outside the named groups")
	cmd.Flags().Int64Var(&in.TimeoutMs, "timeout-ms", 0, "deadline for the whole call (default 300000)")
	a.addJSON(cmd)
	return cmd
}

// resourcesGroupsCmd prints the catalogue; it needs no daemon.
func (a *app) resourcesGroupsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List the resource groups a request may name, per platform",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			groups := contract.ResourceGroups()
			if a.jsonOut {
				return a.printJSON(map[string]any{"groups": groups})
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tPLATFORMS\tSCOPE")
			for _, g := range groups {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Name, strings.Join(g.Platforms, ","), g.Doc)
			}
			return tw.Flush()
		},
	}
	a.addJSON(cmd)
	return cmd
}

// printResources prints a result: the JSON itself with --json, else one
// line per group and the verdict.
func (a *app) printResources(res contract.ResourceResult) error {
	if a.jsonOut {
		return a.printJSON(res)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tREQUESTED\tOBSERVED\tREASON")
	names := make([]string, 0, len(res.Resources))
	for g := range res.Resources {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		req := "-"
		if s, ok := res.Requested[g]; ok {
			req = string(s)
		}
		o := res.Resources[g]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g, req, o.State, o.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Changed) > 0 {
		fmt.Fprintf(a.env.Stdout, "changed: %s\n", strings.Join(res.Changed, ", "))
	}
	for _, d := range []*contract.ResourceDrift{res.Drift, res.FinalDrift} {
		if d != nil && !d.Empty() {
			fmt.Fprintf(a.env.Stdout, "drift: missingRequested=%v ownedExtra=%v unsupported=%v commandFailure=%v\n",
				d.MissingRequested, d.OwnedExtra, d.Unsupported, d.CommandFailure)
		}
	}
	if res.Restore != nil {
		fmt.Fprintln(a.env.Stdout, "restore receipt: rerun with --json to keep it")
	}
	fmt.Fprintf(a.env.Stdout, "verification: %s, success: %t\n", res.Verification, res.Success)
	return nil
}

// unproven turns an answer whose requested state was not observed into
// exit 1, after the evidence is printed: a script that tuned a device must
// not carry on as if it had worked.
func unproven(res contract.ResourceResult) error {
	if res.Success {
		return nil
	}
	return exitError{1}
}

// parseResourceMap reads GROUP=STATE pairs (each argument may hold several,
// comma-separated). The daemon validates the names against the platform;
// here only the shape is checked.
func parseResourceMap(args []string) (map[string]contract.ResourceState, error) {
	m := map[string]contract.ResourceState{}
	for _, arg := range args {
		for _, kv := range strings.Split(arg, ",") {
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, contract.Errorf(contract.CodeBadRequest, "%q is not GROUP=enabled|disabled", kv).
					WithNext("for example: animations=disabled widgets=enabled (`simlock resources groups` lists the groups)")
			}
			if _, dup := m[k]; dup {
				return nil, contract.Errorf(contract.CodeBadRequest, "group %q is named twice", k)
			}
			m[k] = contract.ResourceState(v)
		}
	}
	if err := contract.ValidateResourceRequest("", m); err != nil {
		return nil, err
	}
	return m, nil
}

// parseHardware reads --hardware: comma-separated key=value pairs named as
// the contract's AndroidHardware fields.
func parseHardware(s string) (*contract.AndroidHardware, error) {
	var hw contract.AndroidHardware
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, contract.Errorf(contract.CodeBadRequest, "--hardware: %q is not key=value", kv)
		}
		num := func(dst *int) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return contract.Errorf(contract.CodeBadRequest, "--hardware: %s=%q is not a number", k, v)
			}
			*dst = n
			return nil
		}
		flag := func(dst **bool) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return contract.Errorf(contract.CodeBadRequest, "--hardware: %s=%q is not true or false", k, v)
			}
			*dst = &b
			return nil
		}
		var err error
		switch k {
		case "memoryMb":
			err = num(&hw.MemoryMB)
		case "cpuCores":
			err = num(&hw.CPUCores)
		case "screenWidth":
			err = num(&hw.ScreenWidth)
		case "screenHeight":
			err = num(&hw.ScreenHeight)
		case "screenDensity":
			err = num(&hw.ScreenDensity)
		case "gpuMode":
			hw.GPUMode = v
		case "cameraFront":
			hw.CameraFront = v
		case "cameraBack":
			hw.CameraBack = v
		case "audioInput":
			err = flag(&hw.AudioInput)
		case "audioOutput":
			err = flag(&hw.AudioOutput)
		default:
			err = contract.Errorf(contract.CodeBadRequest, "--hardware: unknown key %q", k).
				WithNext("keys: memoryMb, cpuCores, gpuMode, screenWidth, screenHeight, screenDensity, cameraFront, cameraBack, audioInput, audioOutput")
		}
		if err != nil {
			return nil, err
		}
	}
	if err := hw.Validate(); err != nil {
		return nil, err
	}
	return &hw, nil
}

// readReceipt loads a restore receipt from a file holding either a whole
// resources answer (as --json prints it) or the receipt alone.
func readReceipt(path string) (*contract.RestoreReceipt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var whole struct {
		Restore *contract.RestoreReceipt `json:"restore"`
	}
	if json.Unmarshal(b, &whole) == nil && whole.Restore != nil {
		return whole.Restore, nil
	}
	var r contract.RestoreReceipt
	if err := json.Unmarshal(b, &r); err != nil || r.Serial == "" {
		return nil, contract.Errorf(contract.CodeBadRequest, "%s holds no restore receipt", path).
			WithNext("save an Android answer with `simlock resources set LEASE ... --json > receipt.json`")
	}
	return &r, nil
}
