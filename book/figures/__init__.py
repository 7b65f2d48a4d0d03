"""Code that draws the book's figures and prints its worked examples, run at build time."""
