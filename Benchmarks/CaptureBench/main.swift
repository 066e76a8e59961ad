print("capture bench: not built yet")
