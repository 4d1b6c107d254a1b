"""KEP-2133 image credential providers: the kubelet's exec protocol for registry credentials.

cpcreds runs the kubelet's credential provider plugins for Python programs
(:class:`cpcreds.ImageCredentials`, ``cpcreds image-credential``; docs/images.md) and ships its
own providers as kubelet plugins.

Modules, in the order a lookup goes through them: :mod:`.config` (the CredentialProviderConfig),
:mod:`.reference` (image references as the kubelet normalises them), :mod:`.match` (matchImages
and auth keys), :mod:`.cache` (answers by cacheKeyType, one run per key), :mod:`.runner` (one
plugin run), :mod:`.protocol` (the wire types), :mod:`.serviceaccount` (the pod's identity for
providers with tokenAttributes, KEP-4412), :mod:`.credentials` (ImageCredentials and its results),
:mod:`.command` (the CLI command).
"""
