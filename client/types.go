package client

// The client's types are the contract's. These aliases let a program outside
// this module name them, since contract cannot be imported from
// elsewhere; they are the same types, not copies.

import "github.com/simlock/simlock/contract"

type (
	Role                   = contract.Role
	Error                  = contract.Error
	Code                   = contract.Code
	Session                = contract.Session
	Operation[In, Out any] = contract.Operation[In, Out]
	ProtocolRange          = contract.ProtocolRange
	HelloIn                = contract.HelloIn
	HelloOut               = contract.HelloOut
	Device                 = contract.Device
	Lease                  = contract.Lease
	LeaseRequestIn         = contract.LeaseRequestIn
	LeaseRenewIn           = contract.LeaseRenewIn
	LeaseReleaseIn         = contract.LeaseReleaseIn
	LeaseReleaseOut        = contract.LeaseReleaseOut
	LeaseReleaseAllIn      = contract.LeaseReleaseAllIn
	LeaseReleaseAllOut     = contract.LeaseReleaseAllOut
	LeaseCancelIn          = contract.LeaseCancelIn
	LeaseCancelOut         = contract.LeaseCancelOut
	LeaseGetIn             = contract.LeaseGetIn
	LeaseRequestStatusIn   = contract.LeaseRequestStatusIn
	LeaseRequestReceipt    = contract.LeaseRequestReceipt
	LeaseTiming            = contract.LeaseTiming
	LeaseListIn            = contract.LeaseListIn
	LeaseListOut           = contract.LeaseListOut
	Progress               = contract.Progress
	StatusGetIn            = contract.StatusGetIn
	DaemonInfo             = contract.DaemonInfo
	PlatformCapacity       = contract.PlatformCapacity
	Capacity               = contract.Capacity
	QueueEntry             = contract.QueueEntry
	StatusGetOut           = contract.StatusGetOut
	ListGetIn              = contract.ListGetIn
	ListGetOut             = contract.ListGetOut
	CatalogGetIn           = contract.CatalogGetIn
	CatalogModel           = contract.CatalogModel
	CatalogRuntime         = contract.CatalogRuntime
	PlatformCatalog        = contract.PlatformCatalog
	CatalogGetOut          = contract.CatalogGetOut
	ConfigGetIn            = contract.ConfigGetIn
	ConfigGetOut           = contract.ConfigGetOut
	EventsSubscribeIn      = contract.EventsSubscribeIn
	Event                  = contract.Event
	EventsSubscribeOut     = contract.EventsSubscribeOut
	TokenCreateIn          = contract.TokenCreateIn
	TokenCreateOut         = contract.TokenCreateOut
	TokenInfo              = contract.TokenInfo
	TokenListIn            = contract.TokenListIn
	TokenListOut           = contract.TokenListOut
	TokenRevokeIn          = contract.TokenRevokeIn
	TokenRevokeOut         = contract.TokenRevokeOut
	DaemonStopIn           = contract.DaemonStopIn
	DaemonStopOut          = contract.DaemonStopOut
	PassthroughIn          = contract.PassthroughIn
	PassthroughOut         = contract.PassthroughOut
	CleanupRunIn           = contract.CleanupRunIn
	CleanupAction          = contract.CleanupAction
	CleanupRunOut          = contract.CleanupRunOut
	DoctorRunIn            = contract.DoctorRunIn
	DoctorFinding          = contract.DoctorFinding
	DoctorRunOut           = contract.DoctorRunOut
	NukeRunIn              = contract.NukeRunIn
	NukeRunOut             = contract.NukeRunOut
	LeaseNotice            = contract.LeaseNotice
	DeviceExecIn           = contract.DeviceExecIn
	DeviceExecOut          = contract.DeviceExecOut
	DeviceReleaseIn        = contract.DeviceReleaseIn
	DeviceReleaseOut       = contract.DeviceReleaseOut
	DaemonCleanReport      = contract.DaemonCleanReport
	ExecOutput             = contract.ExecOutput
	WorkerRef              = contract.WorkerRef
	WorkerView             = contract.WorkerView
	WorkerListIn           = contract.WorkerListIn
	WorkerListOut          = contract.WorkerListOut
	WorkerIn               = contract.WorkerIn
	WorkerOut              = contract.WorkerOut
)

// Operations, to pass to Do.
var (
	Hello              = contract.Hello
	StatusGet          = contract.StatusGet
	ListGet            = contract.ListGet
	CatalogGet         = contract.CatalogGet
	ConfigGet          = contract.ConfigGet
	LeaseRequest       = contract.LeaseRequest
	LeaseRenew         = contract.LeaseRenew
	LeaseRelease       = contract.LeaseRelease
	LeaseReleaseAll    = contract.LeaseReleaseAll
	LeaseCancel        = contract.LeaseCancel
	LeaseGet           = contract.LeaseGet
	LeaseRequestStatus = contract.LeaseRequestStatus
	LeaseList          = contract.LeaseList
	EventsSubscribe    = contract.EventsSubscribe
	TokenCreate        = contract.TokenCreate
	TokenList          = contract.TokenList
	TokenRevoke        = contract.TokenRevoke
	DaemonStop         = contract.DaemonStop
	CleanupRun         = contract.CleanupRun
	DoctorRun          = contract.DoctorRun
	NukeRun            = contract.NukeRun
	DeviceExec         = contract.DeviceExec
	DeviceRelease      = contract.DeviceRelease
	WorkerList         = contract.WorkerList
	WorkerDrain        = contract.WorkerDrain
	WorkerUndrain      = contract.WorkerUndrain
	WorkerRemove       = contract.WorkerRemove
	Passthrough        = contract.Passthrough
)

// allOperations lists every re-exported operation (a test checks none is missing).
var allOperations = []contract.Op{Hello.Op, StatusGet.Op, ListGet.Op, CatalogGet.Op, ConfigGet.Op, LeaseRequest.Op, LeaseRenew.Op, LeaseRelease.Op, LeaseReleaseAll.Op, LeaseCancel.Op, LeaseGet.Op, LeaseRequestStatus.Op, LeaseList.Op, EventsSubscribe.Op, TokenCreate.Op, TokenList.Op, TokenRevoke.Op, DaemonStop.Op, CleanupRun.Op, DoctorRun.Op, NukeRun.Op, DeviceExec.Op, DeviceRelease.Op, WorkerList.Op, WorkerDrain.Op, WorkerUndrain.Op, WorkerRemove.Op, Passthrough.Op}
