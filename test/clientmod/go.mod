// A program outside the simlock module, importing only its public
// packages; test/e2e's TestAnotherModuleHoldsALeaseAcrossARestart builds
// and runs it.
module example.com/clientmod

go 1.26.0

require github.com/simlock/simlock v0.0.0

replace github.com/simlock/simlock => ../..
