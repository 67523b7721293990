"""`fabricref explore`: a local web application over the registry (FastAPI on uvicorn, loopback by default).

It reads the registry read-only and computes with the same library as the pipeline and the Python API (explorer.py's
`Explorer`, over `fabricref.api` and the floors below); pages are Jinja templates with autoescaping, every script is
a file under static/ (no inline script, no CDN, no network), and every response carries a Content-Security-Policy
that says so.
"""
