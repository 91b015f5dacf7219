"""Chat-bot frameworks: libraries whose handlers are called with what a remote user sends.

Split out of :mod:`caplet._scan._sources` (one concern, a list that grows with each family of
remote-control bots found on PyPI; :mod:`caplet._scan._network_input` reads the handlers'
parameters as the peer's data, the prefilter sends a file importing one to the AST pass).
"""

from __future__ import annotations

from typing import Final

__all__ = ["BOT_FRAMEWORKS"]

#: Chat-bot frameworks (top-level import names): parameters of their handlers carry a remote
#: user's text.
BOT_FRAMEWORKS: Final = frozenset(
    {
        "telebot",
        "telegram",
        "aiogram",
        "pyrogram",
        "telethon",
        "discord",
        "nextcord",
        "disnake",
        "interactions",
        "slack_bolt",
        "vk_api",
        "twitchio",
        "zulip",  # ZiChatBot (uuid32-utils, colorinal, termncolor; July 2025): blind15
        # Matrix clients and bot kits: a room's messages handed to registered callbacks
        # (client.add_event_callback(on_message, RoomMessageText); blind35)
        "nio",
        "mautrix",
        "simplematrixbotlib",
        "matrix_client",
        # more Discord and chat libraries with the same handler shape
        "hikari",
        "mattermostdriver",
        # IRC and XMPP clients: a channel's messages handed to a subclass's on_pubmsg or
        # a registered handler (the IRC botnet clients; blind37)
        "irc",
        "irc3",
        "pydle",
        "bottom",
        "miniirc",
        "slixmpp",
    }
)
