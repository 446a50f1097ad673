"""What a run wrote, as frames: its request records, cells, scrapes, server logs and manifest, read
strictly where a field decides a number and leniently elsewhere."""
