"""The op cost model: FLOPs and bytes per operator call, device peaks."""
