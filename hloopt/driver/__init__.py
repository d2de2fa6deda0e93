"""One module's flow from file to file, and batches of them."""
