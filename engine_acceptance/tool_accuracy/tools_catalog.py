"""The tools the tool-accuracy set offers, one small JSON-schema family per shape.

Descriptions are short, so 20+ tools still fit a small context. The schemas use
only what every structured-output grammar (xgrammar, guidance, outlines, llama.cpp's
GBNF) compiles: ``type`` (single or a list with ``"null"``), ``properties``,
``required``, ``additionalProperties: false``, ``items``, ``minItems``/``maxItems``,
``uniqueItems``, ``enum``, ``const``, ``anyOf``, ``oneOf`` (branches that cannot
overlap), ``$defs`` with local ``$ref`` (never recursive), ``minimum``/``maximum``,
``minLength``/``maxLength`` and ``format: date``. No ``pattern``, no other formats,
no ``if``/``then``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOLS", "arr", "boolean", "date", "enum", "integer", "number", "obj", "string", "tool"]

Schema = dict[str, Any]


def string(description: str = "", **extra: Any) -> Schema:
    return {"type": "string", **({"description": description} if description else {}), **extra}


def integer(description: str = "", **extra: Any) -> Schema:
    return {"type": "integer", **({"description": description} if description else {}), **extra}


def number(description: str = "", **extra: Any) -> Schema:
    return {"type": "number", **({"description": description} if description else {}), **extra}


def boolean(description: str = "") -> Schema:
    return {"type": "boolean", **({"description": description} if description else {})}


def date(description: str = "") -> Schema:
    return {"type": "string", "format": "date", **({"description": description} if description else {})}


def enum(values: list[Any], description: str = "") -> Schema:
    kind = "integer" if all(isinstance(v, int) for v in values) else "string"
    return {"type": kind, "enum": values, **({"description": description} if description else {})}


def obj(properties: dict[str, Schema], required: list[str] | None = None, **extra: Any) -> Schema:
    """An object; every property is required unless `required` says otherwise."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, "additionalProperties": False, **extra}


def arr(items: Schema, min_items: int = 1, **extra: Any) -> Schema:
    return {"type": "array", "items": items, "minItems": min_items, **extra}


def tool(name: str, description: str, parameters: Schema | None) -> dict[str, Any]:
    """The OpenAI tool form; `parameters` None leaves the field out (a function without parameters)."""
    function: dict[str, Any] = {"name": name, "description": description}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


_ADDRESS = obj({"street": string(), "city": string(), "postal_code": string()})
_MONEY = obj({"amount": number(minimum=0), "currency": string(minLength=3, maxLength=3)})

TOOLS: dict[str, dict[str, Any]] = {t["function"]["name"]: t for t in [
    # --- flat -----------------------------------------------------------------------------
    tool("get_weather", "Current weather of one city", obj({"city": string("City name", minLength=1)})),
    tool("get_stock_price", "Latest price of a stock", obj({"symbol": string("Ticker symbol", minLength=1)})),
    tool("convert_currency", "Convert an amount between currencies",
         obj({"amount": number(minimum=0), "from_currency": string("ISO code", minLength=3, maxLength=3),
              "to_currency": string("ISO code", minLength=3, maxLength=3)})),
    tool("send_email", "Send an email", obj({"to": string("Address"), "subject": string(), "body": string()})),
    tool("calculate_tip", "Tip for a bill",
         obj({"bill_amount": number(minimum=0), "tip_percent": integer(minimum=0, maximum=100)})),
    tool("translate_text", "Translate text", obj({"text": string(), "target_language": string("Language name")})),
    tool("lookup_word", "Dictionary definition of a word", obj({"word": string(minLength=1)})),
    tool("get_flight_status", "Status of a flight on a date",
         obj({"flight_number": string(), "date": date("YYYY-MM-DD")})),
    tool("set_reminder", "Remind the user later",
         obj({"message": string(), "minutes_from_now": integer(minimum=1, maximum=1440)})),
    tool("track_package", "Where a parcel is", obj({"tracking_number": string(minLength=1)})),
    tool("calculate_bmi", "Body mass index",
         obj({"weight_kg": number(exclusiveMinimum=0), "height_cm": number(exclusiveMinimum=0)})),
    tool("get_exchange_rate", "Rate between two currencies",
         obj({"base": string(minLength=3, maxLength=3), "quote": string(minLength=3, maxLength=3)})),
    # --- nested objects ---------------------------------------------------------------------
    tool("create_calendar_event", "Add an event to the calendar", obj({"event": obj({
        "title": string(), "start": obj({"date": date(), "time": string("HH:MM")}),
        "location": obj({"name": string(), "room": string()}, required=["name"])})})),
    tool("book_hotel", "Book a hotel room", obj({
        "guest": obj({"name": string(), "email": string()}),
        "stay": obj({"check_in": date(), "nights": integer(minimum=1, maximum=30)}),
        "room": obj({"type": enum(["single", "double", "suite"])})})),
    tool("create_user_profile", "Create a user profile", obj({"user": obj({
        "name": string(), "age": integer(minimum=0, maximum=150), "address": _ADDRESS})})),
    tool("submit_order", "Place an order", obj({
        "customer": obj({"id": string(), "name": string()}),
        "shipping": obj({"method": enum(["standard", "express"]),
                         "address": obj({"line1": string(), "country": string()})})})),
    tool("configure_alert", "Alert on a metric", obj({
        "rule": obj({"metric": string(), "condition": obj({"operator": enum([">", "<"]),
                                                           "threshold": number()})}),
        "notify": obj({"channel": enum(["email", "sms", "slack"])})})),
    tool("update_settings", "Change app settings", obj({
        "display": obj({"theme": enum(["light", "dark"]), "font_size": integer(minimum=10, maximum=32)}),
        "privacy": obj({"share_usage": boolean()})})),
    # --- arrays ------------------------------------------------------------------------------
    tool("add_tags", "Tag an item", obj({"item_id": string(), "tags": arr(string(), 1, maxItems=5)})),
    tool("create_playlist", "Make a playlist", obj({
        "name": string(), "songs": arr(obj({"title": string(), "artist": string()}), 2)})),
    tool("compute_statistics", "Mean, median and spread of numbers", obj({"numbers": arr(number(), 3)})),
    tool("send_group_message", "Message several people",
         obj({"message": string(), "recipients": arr(string(), 2, uniqueItems=True)})),
    tool("plan_trip", "Plan a trip through several stops",
         obj({"stops": arr(obj({"place": string(), "days": integer(minimum=1)}), 2)})),
    tool("schedule_meetings", "Schedule meetings",
         obj({"slots": arr(obj({"date": date(), "duration_minutes": integer(minimum=15, maximum=240)}), 1)})),
    tool("order_items", "Order items by SKU",
         obj({"items": arr(obj({"sku": string(), "quantity": integer(minimum=1)}), 1)})),
    tool("delete_records", "Delete records by id",
         obj({"record_ids": arr(integer(minimum=1), 1, uniqueItems=True)})),
    # --- enums ------------------------------------------------------------------------------
    tool("set_fan_speed", "Set a fan's speed", obj({"room": string(), "speed": enum(["low", "medium", "high"])})),
    tool("convert_units", "Convert a length", obj({
        "value": number(), "from_unit": enum(["km", "mi", "m", "ft"]), "to_unit": enum(["km", "mi", "m", "ft"])})),
    tool("change_language", "Change the interface language",
         obj({"language": enum(["english", "chinese", "japanese", "french", "german"])})),
    tool("set_ticket_priority", "Set a ticket's priority",
         obj({"ticket_id": string(), "priority": enum(["P0", "P1", "P2", "P3"])})),
    tool("order_coffee", "Order a coffee", obj({
        "drink": enum(["latte", "americano", "cappuccino", "mocha"]), "size": enum(["small", "medium", "large"])})),
    tool("rate_movie", "Rate a movie", obj({"title": string(), "stars": enum([1, 2, 3, 4, 5])})),
    tool("set_light_mode", "Set the lights' mode", obj({"mode": enum(["warm", "cool", "daylight", "night"])})),
    # --- anyOf / oneOf / nullable -------------------------------------------------------------
    tool("lookup_order", "Find an order by number or code",
         obj({"order_id": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "minLength": 1}]}})),
    tool("set_timeout", "Set a request timeout; null for none",
         obj({"service": string(), "seconds": {"type": ["integer", "null"], "minimum": 1}})),
    tool("update_contact", "Update a contact", obj({
        "name": string(), "phone": {"type": ["string", "null"]}, "email": {"anyOf": [string(), {"type": "null"}]}},
        required=["name", "phone"])),
    tool("send_notification", "Notify by email or SMS", obj({
        "target": {"oneOf": [
            obj({"kind": {"const": "email"}, "address": string()}),
            obj({"kind": {"const": "sms"}, "phone": string()})]},
        "text": string()})),
    tool("set_discount", "Discount percent, or free",
         obj({"product": string(), "discount": {"anyOf": [number(minimum=0, maximum=100),
                                                          {"type": "string", "enum": ["free"]}]}})),
    tool("search_events", "Find events, on a date or any date",
         obj({"keyword": string(), "date": {"anyOf": [date(), {"type": "null"}]}})),
    tool("resize_image", "Resize an image", obj({
        "file": string(),
        "width": {"oneOf": [integer(minimum=1), {"type": "string", "enum": ["auto"]}]},
        "height": {"oneOf": [integer(minimum=1), {"type": "string", "enum": ["auto"]}]}})),
    # --- $defs / $ref -------------------------------------------------------------------------
    tool("create_invoice", "Create an invoice", {
        "type": "object",
        "$defs": {"Address": obj({"street": string(), "city": string()}),
                  "Party": obj({"name": string(), "address": {"$ref": "#/$defs/Address"}}),
                  "Money": _MONEY},
        "properties": {"seller": {"$ref": "#/$defs/Party"}, "buyer": {"$ref": "#/$defs/Party"},
                       "total": {"$ref": "#/$defs/Money"}},
        "required": ["seller", "buyer", "total"], "additionalProperties": False}),
    tool("register_guests", "Register guests", {
        "type": "object", "$defs": {"Guest": obj({"name": string(), "age": integer(minimum=0)})},
        "properties": {"event": string(), "guests": arr({"$ref": "#/$defs/Guest"}, 2)},
        "required": ["event", "guests"], "additionalProperties": False}),
    tool("ship_parcel", "Ship a parcel", {
        "type": "object", "$defs": {"Address": _ADDRESS},
        "properties": {"sender": {"$ref": "#/$defs/Address"}, "recipient": {"$ref": "#/$defs/Address"},
                       "weight_kg": number(exclusiveMinimum=0)},
        "required": ["sender", "recipient", "weight_kg"], "additionalProperties": False}),
    tool("create_project", "Create a project with members", {
        "type": "object",
        "$defs": {"Member": obj({"name": string(), "role": enum(["owner", "editor", "viewer"])})},
        "properties": {"title": string(), "owner": {"$ref": "#/$defs/Member"},
                       "members": arr({"$ref": "#/$defs/Member"}, 1)},
        "required": ["title", "owner", "members"], "additionalProperties": False}),
    tool("log_expense", "Record an expense", {
        "type": "object", "$defs": {"Money": _MONEY,
                                    "Category": enum(["food", "travel", "office", "other"])},
        "properties": {"cost": {"$ref": "#/$defs/Money"}, "category": {"$ref": "#/$defs/Category"},
                       "note": string()},
        "required": ["cost", "category"], "additionalProperties": False}),
    tool("transfer_funds", "Move money between accounts", {
        "type": "object", "$defs": {"Account": obj({"iban": string(), "holder": string()}), "Money": _MONEY},
        "properties": {"source": {"$ref": "#/$defs/Account"}, "destination": {"$ref": "#/$defs/Account"},
                       "amount": {"$ref": "#/$defs/Money"}},
        "required": ["source", "destination", "amount"], "additionalProperties": False}),
    # --- optional parameters ------------------------------------------------------------------
    tool("search_products", "Search the shop", obj({
        "query": string(), "max_price": number(minimum=0), "category": enum(["books", "toys", "tools", "games"]),
        "in_stock": boolean(), "sort_by": enum(["price", "rating", "newest"])}, required=["query"])),
    tool("find_restaurants", "Restaurants in a city", obj({
        "city": string(), "cuisine": string(), "price_level": integer(minimum=1, maximum=4),
        "open_now": boolean()}, required=["city"])),
    tool("list_files", "List files in a directory", obj({
        "directory": string(), "recursive": boolean(), "glob": string(), "limit": integer(minimum=1)},
        required=["directory"])),
    tool("create_task", "Add a to-do task", obj({
        "title": string(), "due_date": date(), "priority": enum(["low", "normal", "urgent"]), "assignee": string()},
        required=["title"])),
    tool("get_news", "Latest news on a topic", obj({
        "topic": string(), "language": enum(["en", "zh", "ja"]), "limit": integer(minimum=1, maximum=20)},
        required=["topic"])),
    tool("book_table", "Reserve a restaurant table", obj({
        "restaurant": string(), "party_size": integer(minimum=1, maximum=20), "time": string("HH:MM"),
        "notes": string()}, required=["restaurant", "party_size"])),
    # --- parameterless ------------------------------------------------------------------------
    tool("get_current_time", "The current time", {"type": "object", "properties": {}}),
    tool("list_devices", "Devices on the account", None),
    tool("get_server_status", "Health of the server", {"type": "object"}),
    tool("refresh_cache", "Clear and rebuild the cache",
         {"type": "object", "properties": {}, "additionalProperties": False}),
    tool("get_random_joke", "A random joke", None),
    tool("whoami", "The signed-in user", {"type": "object", "properties": {}, "required": []}),
    # --- CJK and emoji arguments ----------------------------------------------------------------
    tool("send_message", "Send a chat message", obj({"recipient": string(), "text": string(minLength=1)})),
    tool("create_note", "Save a note", obj({"title": string(), "content": string()})),
    tool("post_status", "Post a status update", obj({"text": string(minLength=1, maxLength=280)})),
    tool("rename_file", "Rename a file", obj({"old_name": string(), "new_name": string()})),
    tool("search_music", "Search songs", obj({"query": string(minLength=1)})),
    tool("set_nickname", "Set the user's nickname", obj({"nickname": string(minLength=1, maxLength=32)})),
    # --- places (parallel calls) --------------------------------------------------------------
    tool("get_air_quality", "Air quality index of a city", obj({"city": string(minLength=1)})),
    tool("get_local_time", "Local time at a place", obj({"location": string(minLength=1)})),
    tool("get_population", "Population of a city", obj({"city_name": string(minLength=1)})),
    tool("find_hotels", "Hotels in a city",
         obj({"city": string(minLength=1), "nights": integer(minimum=1)}, required=["city"])),
]}
