"""ModelPack (``vnd.cnai`` / ``vnd.cncf``) as a family: the pivot every other kind maps onto."""
