"""serve's web pages (issue 56): server-rendered HTML at the Hub's own web paths."""
