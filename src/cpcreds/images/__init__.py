"""KEP-2133 image credential providers: the kubelet's exec protocol for registry credentials.

cpcreds runs the kubelet's credential provider plugins for Python programs
(:class:`cpcreds.ImageCredentials`) and ships its own providers as kubelet plugins.
"""
