"""The API's routes by resource, one `APIRouter` per module; api/app.py includes them in `ROUTERS` order."""
