"""Docker execution of untrusted code. Imports nothing of rlvr's other packages."""
