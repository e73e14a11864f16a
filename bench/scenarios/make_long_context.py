#!/usr/bin/env python3
"""Writes bench/scenarios/long_context.txt: the document of the Long Context scenario, a
fictional field-operations handbook of many short site sections, made from our own sentence
templates with a fixed seed (so the file is reproducible and committed). The harness keeps as many
whole sections as fit the model's context (see scenarios.py); the question at the end asks for
facts stated in one early section, so the answer needs the whole prompt to be read.

Usage: bench/scenarios/make_long_context.py [--sections N]
"""
import argparse
import random
from pathlib import Path

CITIES = ["Arden", "Belmont", "Corvale", "Dunmore", "Eastwick", "Fairhaven", "Glenrock", "Harlow",
          "Ivybridge", "Juniper Falls", "Kestrel Bay", "Larkspur", "Millbrook", "Northgate",
          "Oakridge", "Pinecrest", "Quarry Hill", "Redmond Flats", "Silverton", "Thornbury",
          "Upton", "Valewood", "Westmere", "Yarrow Point", "Zephyr Ridge"]
PEOPLE = ["Amara Okafor", "Ben Hollis", "Chen Wei", "Dana Kowalski", "Elif Demir", "Farid Nasser",
          "Greta Lindqvist", "Hiro Tanaka", "Ines Moreau", "Jonas Berg", "Kavya Rao",
          "Liam O'Neill", "Maya Cohen", "Nikolai Petrov", "Olivia Grant", "Pablo Ruiz",
          "Quinn Murphy", "Rosa Alvarez", "Sami Haddad", "Tess Whitaker"]
EQUIPMENT = ["diesel generator", "water pump", "forklift", "air compressor", "backup battery bank",
             "cold-storage unit", "conveyor belt", "loading crane", "ventilation fan",
             "fire suppression panel"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

TEMPLATES = [
    "The site manager is {person}, who has run the depot since {year}.",
    "Deliveries arrive on {day} mornings and are checked against the manifest before noon.",
    "The {equipment} is inspected every {n} weeks; the last inspection found {finding}.",
    "Staff must sign in at the east gate, where the visitor log is kept in a grey binder.",
    "In winter the access road is gritted by the county, usually before six in the morning.",
    "The emergency assembly point is the car park beside the {landmark}.",
    "Spare parts for the {equipment} are stored in cage {cage}, and the key is held by {person}.",
    "The site holds {n} pallets of stock on a typical day and up to {m} during the autumn peak.",
    "Night shifts are covered by a rota of {n} technicians, with one always on call by radio.",
    "The local fire station is {n} kilometres away and has visited for a drill in {year}.",
    "Waste oil is collected every {day} by a licensed contractor and logged on form W-{cage}.",
    "The roof was resurfaced in {year} after a leak damaged the records room.",
    "A heat map of the yard is updated monthly to plan where incoming loads are staged.",
    "Temperature in the cold store must stay between two and {n} degrees Celsius.",
    "Any forklift collision, however small, is reported to {person} within one hour.",
]
FINDINGS = ["a worn drive belt", "a cracked hose clamp", "no faults", "a loose earth cable",
            "low coolant", "a sticking valve", "a faulty pressure gauge"]
LANDMARKS = ["old water tower", "canteen", "north fence", "weighbridge", "training hut"]


def section(rng, i):
    city = CITIES[i % len(CITIES)] + ("" if i < len(CITIES) else f" {i // len(CITIES) + 1}")
    lines = [f"## Site {i + 1}: {city} depot", ""]
    for t in rng.sample(TEMPLATES, 9):
        lines.append(t.format(person=rng.choice(PEOPLE), year=rng.randint(1998, 2023),
                              day=rng.choice(WEEKDAYS), equipment=rng.choice(EQUIPMENT),
                              n=rng.randint(2, 12), m=rng.randint(300, 900),
                              finding=rng.choice(FINDINGS), landmark=rng.choice(LANDMARKS),
                              cage=rng.randint(1, 40)))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", type=int, default=64)
    a = ap.parse_args()
    rng = random.Random(20261129)
    body = "\n\n".join(section(rng, i) for i in range(a.sections))
    out = Path(__file__).with_name("long_context.txt")
    out.write_text(body + "\n")
    print(f"wrote {out} ({len(body.split())} words, {a.sections} sections)")


if __name__ == "__main__":
    main()
