"""The committed media (generated images, videos, corrupt samples) and the answer reading
that the image and video checks use. The request parts that carry media are wire format:
:mod:`engine_acceptance.wire.media_parts`.
"""
