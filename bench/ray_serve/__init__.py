"""The service on Ray Serve: the HTTP proxy path and the deployment-handle client (``handle``),
measured against the plain service (``section``)."""
