"""The one strict base model: every record, payload and request body rejects fields it does not declare."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that refuses unknown fields (`extra="forbid"`), so a typo or a stale field fails loudly
    instead of being dropped. Subclasses add to the config (`frozen`, `hide_input_in_errors`), never loosen it."""

    model_config = ConfigDict(extra="forbid")
