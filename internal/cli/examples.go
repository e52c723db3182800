package cli

import "github.com/spf13/cobra"

// commandExamples is the Example: section of every command, by command
// path. Kept in one table (like commandClaimPolicies) so that
// TestEveryCommandHasAnExample can tell a new command without one.
func commandExamples() map[string]string {
	return map[string]string{
		"simlock": `  simlock lease --platform ios           # a booted iPhone, held until Ctrl-C
  simlock status                          # what runs, who holds what
  simlock help lease`,
		"simlock adb": `  simlock adb devices
  simlock adb -s emulator-5554 install app.apk`,
		"simlock capabilities": `  simlock capabilities
  simlock capabilities --json`,
		"simlock session": `  export SIMLOCK_SESSION_OWNER_TOKEN=...   # the owner token: never on the command line
  simlock session prepare --config session.json --json
  simlock session release 6f1c...`,
		"simlock session prepare": `  simlock session prepare --config session.json --json
  SIMLOCK_SESSION_OWNER_TOKEN=$TOKEN simlock session prepare --config '{"contractVersion":1,"requestId":"ci-1","device":{"schemaVersion":1,"platform":"ios"}}'`,
		"simlock session status":  `  simlock session status ci-1 --json`,
		"simlock session abandon": `  simlock session abandon ci-1 --json`,
		"simlock session release": `  simlock session release 6f1c...
  simlock session release 6f1c... --reply-budget-ms 0 --json`,
		"simlock session stats": `  simlock session stats
  simlock session stats --window-ms 3600000 --json`,
		"simlock session info": `  simlock session info 6f1c... --json`,
		"simlock session hold": `  simlock session hold 6f1c... &   # token from $SIMLOCK_SESSION_OWNER_TOKEN; heartbeats until killed
  simlock session hold 6f1c... --owner-token-file ~/.simlock-session-token &   # a file of mode 0600`,
		"simlock catalog": `  simlock catalog
  simlock catalog --platform android --json`,
		"simlock cleanup": `  simlock cleanup --dry-run
  simlock cleanup --rule idle-shutdown`,
		"simlock config":      `  simlock config show`,
		"simlock config show": `  simlock config show --json`,
		"simlock console": `  simlock console          # print a one-time login link
  simlock console --open   # open it in the browser`,
		"simlock daemon": `  simlock daemon start
  simlock daemon status --json
  simlock daemon stop`,
		"simlock daemon logs": `  simlock daemon logs
  simlock daemon logs -f`,
		"simlock daemon run":    `  simlock daemon run --home /var/lib/simlock`,
		"simlock daemon start":  `  simlock daemon start --json`,
		"simlock daemon status": `  simlock daemon status || simlock daemon start`,
		"simlock daemon stop": `  simlock daemon stop
  simlock daemon stop --clean --json`,
		"simlock demo": `  simlock demo
  simlock demo --speed 0 --keep`,
		"simlock device": `  simlock device status
  simlock device release --stale ios:udid:5A1F...`,
		"simlock device release": `  simlock device release --stale --udid 5A1F...
  simlock device release --force --avd simlock_pixel_8`,
		"simlock device status": `  simlock device status
  simlock device status --platform android --json`,
		"simlock host": `  simlock host repair                     # after HOST_REGISTRY_DAMAGED`,
		"simlock host repair": `  simlock host repair
  simlock host repair --include-home ~/ci/home-7 --json`,
		"simlock doctor": `  simlock doctor
  simlock doctor --fix --json`,
		"simlock events": `  simlock events --since 1h
  simlock events -f --json`,
		"simlock exec": `  simlock exec lse_0123abcd -- simctl openurl booted https://example.com
  simlock exec lse_0123abcd --stdin app.apk -- adb install -r -`,
		"simlock run": `  simlock run --platform ios --model "iPhone 16" -- xcodebuild test -scheme App -destination id={udid}
  simlock run --platform android -- ./gradlew connectedCheck   # ANDROID_SERIAL is set
  simlock run --platform ios -- sh -c 'simlock exec $SIMLOCK_LEASE_ID -- simctl io $SIMLOCK_UDID screenshot shot.png'`,
		"simlock selftest": `  simlock selftest                      # every platform whose tools are on PATH
  simlock selftest --platform android --json`,
		"simlock resources": `  simlock resources get lse_0123abcd
  simlock resources set lse_0123abcd animations=disabled widgets=disabled`,
		"simlock resources get": `  simlock resources get lse_0123abcd
  simlock resources get lse_0123abcd --json | jq .resources.animations`,
		"simlock resources set": `  simlock resources set lse_0123abcd animations=disabled widgets=enabled
  simlock resources set lse_0123abcd animations=disabled --json > receipt.json   # Android
  simlock resources set lse_0123abcd --restore receipt.json`,
		"simlock resources reconcile": `  simlock resources reconcile lse_0123abcd animations=disabled widgets=disabled
  simlock resources reconcile lse_0123abcd animations=disabled --repair --release-owned-extras`,
		"simlock resources groups": `  simlock resources groups
  simlock resources groups --json | jq -r '.groups[].name'`,
		"simlock lease": `  simlock lease --platform ios --model "iPhone 16"   # held until Ctrl-C
  simlock lease --platform android --detach --ttl 30m
  LEASE=$(simlock lease --detach | jq -r .leaseId)
  simlock lease --resources animations=disabled,searchIndexing=disabled --detach
  simlock lease --platform android --hardware memoryMb=4096,gpuMode=swiftshader`,
		"simlock lease cancel": `  simlock lease cancel --requester ci-job-42`,
		"simlock lease get": `  simlock lease get lse_0123abcd
  simlock lease get req_0123abcd --json`,
		"simlock lease list": `  simlock lease list
  simlock lease list --json | jq -r '.leases[].leaseId'`,
		"simlock lease renew": `  simlock lease renew lse_0123abcd
  simlock lease renew lse_0123abcd --ttl 1h`,
		"simlock list": `  simlock list
  simlock list --json`,
		"simlock mcp": `  simlock mcp            # an MCP server on stdio for an agent
  simlock mcp --admin`,
		"simlock nuke": `  simlock nuke --yes`,
		"simlock release": `  simlock release lse_0123abcd
  simlock release --all --requester ci-job-42
  simlock release --everyone --yes`,
		"simlock simctl": `  simlock simctl list devices
  simlock simctl list runtimes`,
		"simlock simsdk":         `  simlock simsdk install ./sdk && export PATH=$PWD/sdk:$PATH`,
		"simlock simsdk install": `  simlock simsdk install ./sdk`,
		"simlock simsdk ps":      `  simlock simsdk ps`,
		"simlock simsdk reset":   `  simlock simsdk reset`,
		"simlock status": `  simlock status
  simlock status --json | jq .queueDepth`,
		"simlock token": `  simlock token create --role agent --name ci
  simlock token list`,
		"simlock token create": `  simlock token create --role agent --name ci-runner-1
  simlock token create --role worker --name mac-mini-3`,
		"simlock token list":   `  simlock token list --json`,
		"simlock token revoke": `  simlock token revoke tok_0123abcd`,
		"simlock version": `  simlock version
  simlock version --json`,
		"simlock slot": `  simlock slot list
  simlock slot reset-scope --runner-namespace runner-A --incarnation boot-1`,
		"simlock slot list":        `  simlock slot list --json`,
		"simlock slot reset-scope": `  simlock slot reset-scope --runner-namespace runner-A --incarnation boot-1 --wait-ms 30000 --force`,
		"simlock worker": `  simlock worker list
  simlock worker drain mac-mini-3`,
		"simlock worker drain":   `  simlock worker drain mac-mini-3`,
		"simlock worker list":    `  simlock worker list --json`,
		"simlock worker remove":  `  simlock worker remove mac-mini-3`,
		"simlock worker undrain": `  simlock worker undrain mac-mini-3`,
	}
}

// applyExamples sets each command's Example from the table, leaving one a
// command set itself.
func applyExamples(c *cobra.Command, ex map[string]string) {
	if e, ok := ex[c.CommandPath()]; ok && c.Example == "" {
		c.Example = e
	}
	for _, sub := range c.Commands() {
		applyExamples(sub, ex)
	}
}
