# ax — see README.md.
.PHONY: test build vet fmt

# The README's test command: gofmt check, go vet, go test -race.
test:
	bash scripts/test.sh

build:
	CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/...

vet:
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
