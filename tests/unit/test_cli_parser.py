"""The command line's parser: only the command named is built, and every command is there
for the help."""

from __future__ import annotations

import argparse

import pytest

from changestream.cli.commands import COMMANDS, build_parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_without_a_command_every_command_is_built() -> None:
    assert _commands(build_parser()) == set(COMMANDS)
    assert _commands(build_parser(["--version"])) == set(COMMANDS)
    assert _commands(build_parser(["no-such-command"])) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_named_command_gets_its_own_parser(name: str) -> None:
    assert name in _commands(build_parser([name, "--help"]))


def test_a_run_is_parsed_by_the_run_parser_alone() -> None:
    argv = ["run", "--source", "mysql://root@127.0.0.1:3306", "--until", "caught-up", "-v"]
    parser = build_parser(argv)
    assert _commands(parser) == {"run"}
    args = parser.parse_args(argv)
    assert (args.command, args.until, args.verbose) == ("run", "caught-up", 1)
    assert vars(args) == vars(build_parser().parse_args(argv))
