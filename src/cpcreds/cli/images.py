"""``cpcreds image-credential``: its arguments and work are :mod:`cpcreds.images.command`'s."""

from __future__ import annotations

import argparse

from ..config.settings import Settings

__all__ = ["image_credential"]


def image_credential(args: argparse.Namespace, settings: Settings) -> int:
    from ..images.command import run

    return run(args)
