print("chaos")
