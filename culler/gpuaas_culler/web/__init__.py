"""culler/gpuaas_culler/web"""
