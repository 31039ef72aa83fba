// The e2e test image's only program (see e2e/image/README.md). Standard library only.
module rebalancer.local/e2e/testimage

go 1.25.0
