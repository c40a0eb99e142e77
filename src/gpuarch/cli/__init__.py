"""The ``gpuarch`` command line: parses flags into typed options, calls the library, renders."""
