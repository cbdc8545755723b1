"""τ³-bench's airline MCP server, a FastMCP server on mcp<2 written by others, run from the
environment the Makefile makes for it, read through fsm's client."""

from __future__ import annotations

from airline_env import airline_command

from fsm.adapters.mcp import McpServer

AIRLINE_TOOLS = {
    "book_reservation", "calculate", "cancel_reservation", "get_flight_status",
    "get_reservation_details", "get_user_details", "list_all_airports",
    "search_direct_flight", "search_onestop_flight", "send_certificate",
    "transfer_to_human_agents", "update_reservation_baggages", "update_reservation_flights",
    "update_reservation_passengers",
}


def test_the_airline_server_starts_from_its_own_environment_and_lists_14_tools() -> None:
    server = McpServer("airline", command=airline_command(), timeout=60.0)
    try:
        tools = server.list_tools()
        assert len(tools) == 14
        assert {t.name for t in tools} == AIRLINE_TOOLS
        assert all(t.input_schema.get("type") == "object" for t in tools)
        status = server.call("get_flight_status", {"flight_number": "HAT001",
                                                   "date": "2024-05-15"})
        assert not status.is_error, status
    finally:
        server.close()
