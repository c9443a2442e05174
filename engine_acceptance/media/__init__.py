"""The committed media (generated images, videos, corrupt samples) and the request parts
and answer reading that the image, video and corrupt-media checks use.
"""
