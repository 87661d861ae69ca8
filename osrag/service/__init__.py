"""Network surfaces over the one query path: the HTTP service (``osrag.service.http``, the
``server`` extra) and who is asking it (``osrag.service.auth``).

Nothing is imported here: FastAPI and PyJWT load only when a service is built.
"""
