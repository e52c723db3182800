package contract

// DeviceSpec is one member of a multi-device lease request
// (LeaseRequestIn.Devices): what a single request names with its platform,
// model and osVersion fields.
type DeviceSpec struct {
	Platform  string `json:"platform"`
	Model     string `json:"model,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
}
