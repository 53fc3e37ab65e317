"""The live inspector: pages over the processor's windows, item outcomes and bundles."""
