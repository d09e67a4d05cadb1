"""Local AWS sandbox: moto plus the PCS emulator on one loopback endpoint."""
