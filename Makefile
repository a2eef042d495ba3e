# netclass — build, test, demo and benchmark entry points.
# Every target that needs root or extra packages installs them itself (scripts/deps.sh).

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
DESTDIR ?=
CNI_BIN_DIR ?= /opt/cni/bin
export GOFLAGS := -buildvcs=false

.PHONY: all build install test lint fuzz demo bench clean
all: build

# Fragments owned by the harnesses (VM runner, Kubernetes test bed).
-include scripts/*/*.mk
