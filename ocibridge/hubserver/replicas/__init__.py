"""Several serves over one registry acting as one: readers forward every write to one writer
(:mod:`.forward`), which builds the URLs it hands out from the address the client used
(:mod:`.trusted`)."""
