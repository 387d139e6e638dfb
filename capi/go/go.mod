module github.com/attnkern/attnkern/capi/go

go 1.19
