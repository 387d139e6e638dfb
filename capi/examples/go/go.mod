module example.com/attnkern

go 1.19
