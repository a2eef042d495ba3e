module github.com/netclass-dev/netclass

go 1.26.8
