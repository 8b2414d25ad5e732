"""culler/gpuaas_culler/queue"""
