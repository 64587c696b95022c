"""Turns: supervision, the thread bridge, the editor-side services and local fallbacks, the
permission policy, the one runtime event -> `session/update` mapper, and replay."""
