print("audit bench: not built yet")
