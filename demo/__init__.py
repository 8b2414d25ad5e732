"""`make demo`: bring up jupyter-gpuaas on this one machine and print where to open it."""
