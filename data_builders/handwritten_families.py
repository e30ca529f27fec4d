"""Write the hand-written validation families: five genres no training source resembles, one reference form each.

    python data_builders/handwritten_families.py validation/   # handwritten-near/, -far/, -long/, -pronoun/

Every family is 8 copies of one hand-written document that differ only in what identifies them (a company, a
hotel and its nickname, a firmware version, the woman who led a survey among several people, the group a section of
rules applies to). The asked sentences refer to that identity only as "the company", an alias, "this version",
"she" (three women are named in every copy; who led differs) or "these rules" — the same words in every copy,
except where a sentence uses the copy's nickname while the question uses its full name (or the reverse: the
sentence says "the hotel" and the question uses the nickname). Questions are written as a user would ask them, naming the copy. Each family comes
twice: *near* (~250 tokens, read in one pass) and *far* (a filler of the same genre pushes the asked sentences
beyond the first 512-token window); `handwritten-long` repeats that filler so that a copy spans four windows.
Near, far and long are separate sets: their copies share names, so in one corpus a
near question would have a right answer in the far copy too.

A pronoun form resting on five asked sentences moves 12.5 points when one of them changes side, too coarse to choose
by (builds 29 and 30); `handwritten-pronoun` adds three more pronoun families — a concert programme, a legal case
file (three men), a hospital ward's notes — each with 8 asked sentences that say only "she", "he", "her" or "his",
and puts them beside the field report, near only (29 asked sentences, 232 queries).

No generator of `data_builders/training_families.py` and no training source makes text like this; the set is for
choosing settings only (see the model card), never trained on. Its text is ours (CC0).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validation_sets import write_set  # noqa: E402

from contextembed.training.data import lines_document  # noqa: E402


@dataclass
class Genre:
    kind: str  # the reference form: entity, alias, version, pronoun, condition
    opening: list[str]  # lines naming the copy, with {slots}
    values: list[dict]  # one dict of slot values per copy
    lead: list[str]  # shared lines before the asked ones (never asked)
    asked: list[tuple[str, str]]  # (sentence, question); either may use {slots}
    filler: list[str]  # shared lines of the same genre, put between the lead and the asked lines when far



def rotating_cast(names: tuple[str, ...]) -> list[dict]:
    """One copy per name: that person leads, and two others of the same eight are named beside them (roles rotate, so
    no name marks a copy by itself)."""
    return [{"lead": names[k], "second": names[(k + 1) % len(names)], "third": names[(k + 3) % len(names)]}
            for k in range(len(names))]

HANDBOOK = Genre(
    kind="entity",
    opening=["Employee handbook of {org}.", "This handbook explains how {org} works with the people it employs."],
    values=[{"org": o} for o in ("Northwind Logistics", "Harbor & Finch", "Kestrel Analytics", "Bluewater Freight",
                                 "Orchard Lane Foods", "Meridian Textiles", "Silverline Couriers",
                                 "Copperleaf Insurance")],
    lead=["Our offices open at eight in the morning and close at six in the evening.",
          "Staff badges must be worn at all times inside the building.",
          "New employees complete a two-week induction with their team lead."],
    asked=[("The company pays salaries on the last working day of each month.",
            "When does {org} pay its staff?"),
           ("Approved travel expenses are reimbursed by the company within thirty days of a claim.",
            "How quickly does {org} reimburse travel expenses?"),
           ("Every employee of the company receives twenty-eight days of paid leave a year.",
            "How many days of paid holiday do {org} employees get?"),
           ("The company matches pension contributions up to six percent of salary.",
            "Does {org} match pension contributions?"),
           ("Staff who leave the company must return laptops, phones and keys within a week.",
            "What do people leaving {org} have to hand back?")],
    filler=["The canteen serves hot meals between noon and two.",
            "Meeting rooms are booked through the shared calendar.",
            "Visitors sign in at reception and wear a visitor badge.",
            "Fire drills take place twice a year without notice.",
            "The first-aid room is on the ground floor next to the lifts.",
            "Printers on every floor need a badge to release a job.",
            "Bicycles may be parked in the covered racks behind the building.",
            "Lost property is kept at reception for one month.",
            "The quiet room on the third floor is for focused work only.",
            "Kitchen areas are cleaned every evening by the facilities team.",
            "Team leads hold a short check-in every Monday morning.",
            "Desks are shared, so personal items go into lockers at night.",
            "Training courses are listed on the intranet each quarter.",
            "Managers approve overtime in advance in writing.",
            "Payslips can be downloaded from the staff portal.",
            "A mentoring scheme pairs new starters with experienced colleagues.",
            "Parking spaces are allocated by a monthly draw.",
            "Smoking is not allowed anywhere on the premises.",
            "The wellbeing budget covers gym memberships and eye tests.",
            "All-hands meetings are held on the first Thursday of the quarter.",
            "Confidential papers go into the locked shredding bins.",
            "Dress is smart casual except when meeting clients.",
            "Sick days are reported to the line manager before ten.",
            "Long-service awards are presented at the winter party.",
            "Volunteering days can be taken once a year with approval.",
            "The staff survey runs every autumn and is anonymous.",
            "Internal vacancies are posted for a week before external ones.",
            "Software may only be installed by the IT desk.",
            "Passwords are changed every ninety days.",
            "Expense claims are filed through the finance portal with receipts attached.",
            "The library lends books and journals for up to three weeks.",
            "Notice boards by the lifts carry news from the social club.",
            "Interns receive a certificate at the end of their placement.",
            "Flexible hours must still cover the core time from ten to four.",
            "Travel is booked through the approved agency only.",
            "Coffee and tea are free in every kitchen.",
            "The staff choir rehearses on Wednesday evenings.",
            "Umbrellas can be borrowed from reception.",
            "Desk plants are watered by a contractor on Fridays.",
            "Health and safety officers are named on each floor.",
            "The post room closes at four.",
            "Language classes are offered at lunchtime.",
            "The intranet lists who is on call each week.",
            "Charging points for cars are in the basement.",
            "Shower rooms are next to the bicycle store.",
            "A nurse visits the office once a month.",
            "The board publishes a summary of its meetings.",
            "Company cars are booked through the fleet desk.",
            "Team budgets are set each spring.",
            "The annual report is sent to every member of staff."])

HOTEL = Genre(
    kind="alias",
    opening=["Guest guide: {full}.", "{full}, known to its regulars as {alias}, stands on the old harbour front."],
    values=[{"full": f, "alias": a} for f, a in (
        ("Hotel Bellavista", "the Blue House"), ("The Alder Inn", "the Crooked Roof"),
        ("Hotel Marlowe", "the Lantern"), ("Castleford Lodge", "the Old Mill"),
        ("The Sorrel Hotel", "the Green Door"), ("Hotel Veritas", "the Clock Tower"),
        ("The Quayside Inn", "the Anchor"), ("Rookwood Hall", "the Manor"))],
    lead=["Rooms face either the harbour or the quiet garden courtyard.",
          "Check-in opens at three in the afternoon."],
    asked=[("At {alias_lower}, breakfast is served in the conservatory from seven until half past ten.",
            "What time is breakfast at {full}?"),
           ("Dogs are welcome at the hotel for a fee of fifteen euros a night.",
            "Can I bring my dog to {alias_lower}?"),
           ("The rooftop bar of {alias_lower} closes at midnight on weekdays.",
            "When does the rooftop bar at {full} close?"),
           ("Guests of the hotel park free of charge in the yard behind the kitchen.",
            "Is parking free at {alias_lower}?"),
           ("Late checkout at {alias_lower} costs twenty euros and must be booked the day before.",
            "How much is late checkout at {full}?")],
    filler=["The harbour is a short walk down the cobbled lane.",
            "Fishing boats land their catch at dawn on the north quay.",
            "The old lighthouse can be climbed on summer afternoons.",
            "Ferries to the islands leave every two hours in season.",
            "A farmers' market fills the square on Saturday mornings.",
            "The town museum tells the story of the salt trade.",
            "Cycle paths follow the coast in both directions.",
            "Taxis wait at the rank beside the church.",
            "The beach to the south is sheltered from the west wind.",
            "Most shops close early on Sundays.",
            "The cathedral bells ring on the hour until ten at night.",
            "Local buses stop at the end of the promenade.",
            "Boat tours to the seal colony run from April to October.",
            "The river walk passes three old watermills.",
            "Swimming in the harbour itself is not allowed.",
            "The tourist office lends umbrellas on rainy days.",
            "A footbridge links the old town with the new marina.",
            "The castle ruins are floodlit after dark.",
            "Street musicians play in the square on summer evenings.",
            "The fish restaurant on the corner needs a booking at weekends.",
            "Tide tables are posted on the board by the slipway.",
            "The cliff path is closed after heavy rain.",
            "A small cinema shows films in the original language.",
            "The bakery by the bridge opens at six.",
            "Guided walks start from the town hall at eleven.",
            "Sea kayaks can be hired at the sailing club.",
            "The botanical garden is free on the first Sunday of the month.",
            "The railway station is fifteen minutes away on foot.",
            "Wine from the nearby valley is sold in most delicatessens.",
            "The evening light over the bay draws painters every summer.",
            "A pharmacy on the main street keeps late hours.",
            "Fireworks close the harbour festival in August.",
            "The covered market has stalls selling cheese and honey.",
            "Bird watchers gather at the marsh hide at sunrise.",
            "The old customs house is now an art gallery.",
            "The lighthouse keeper's cottage is now a tea room.",
            "Sunset cruises leave from the west pier.",
            "The harbour wall is popular with anglers.",
            "Antique shops line the narrow high street.",
            "The coastal train stops at four villages.",
            "Oyster beds lie just beyond the sandbar.",
            "The maritime festival fills the quays in July.",
            "A chapel on the headland dates from the twelfth century.",
            "Local honey is sold at the Saturday market.",
            "The old rope works is now a craft centre.",
            "Seagulls nest on the rooftops in spring.",
            "The lifeboat station welcomes visitors on Sundays.",
            "A bus to the airport leaves every hour.",
            "The tidal pool is refilled twice a day by the sea.",
            "The regatta races start at the harbour mouth."])

RELEASE = Genre(
    kind="version",
    opening=["Release notes for the Orion X5 home router, firmware {version}.",
             "These notes describe what firmware {version} changes and what it fixes."],
    values=[{"version": v} for v in ("2.1", "2.4", "3.0", "3.2", "4.0.1", "4.1", "5.0", "5.3")],
    lead=["Install the update from the admin page or the mobile app.",
          "Keep the router plugged in until the status light turns green."],
    asked=[("In this version, the guest network accepts up to twenty devices at once.",
            "How many devices can join the guest network on Orion X5 firmware {version}?"),
           ("This release shortens the restart after an update to about forty seconds.",
            "How long does the Orion X5 take to restart after updating to firmware {version}?"),
           ("With this firmware, parental controls can block sites by schedule as well as by category.",
            "Can firmware {version} of the Orion X5 block websites on a schedule?"),
           ("The update also fixes a bug that dropped video calls when the 5 GHz band changed channel.",
            "Which video call problem does Orion X5 firmware {version} fix?"),
           ("This version turns on automatic security updates by default.",
            "Are automatic security updates on by default in Orion X5 firmware {version}?")],
    filler=["The router has four gigabit ports on the back.",
            "The admin page is reached at the address printed on the label.",
            "Change the default password the first time you log in.",
            "The status light blinks amber while the router starts.",
            "Wall mounting screws are included in the box.",
            "Place the router high up and away from metal objects.",
            "The USB port can share a printer or a drive on the network.",
            "A factory reset needs the pin hole pressed for ten seconds.",
            "The mobile app shows which devices are connected.",
            "Port forwarding rules are set under advanced settings.",
            "The router supports both the 2.4 GHz and 5 GHz bands.",
            "Mesh extenders of the same range pair with one button.",
            "Logs can be exported as a text file for support.",
            "The power adapter uses twelve volts.",
            "Dynamic DNS is available for several providers.",
            "The firewall blocks incoming connections unless a rule allows them.",
            "Quality of service can favour gaming or streaming traffic.",
            "The night mode dims all lights on the front panel.",
            "A backup of the settings can be restored after a reset.",
            "Support articles are listed on the manufacturer's website.",
            "WPS pairing is disabled by default for safety.",
            "The router can act as a VPN server for remote access.",
            "Time settings follow the network time server.",
            "Each wireless band can have its own network name.",
            "The warranty covers two years from the date of purchase.",
            "Beamforming directs the signal towards active devices.",
            "Guest users cannot see devices on the main network.",
            "An eco mode lowers power use at night.",
            "The router reports its temperature on the status page.",
            "Older devices may need the compatibility mode for WPA2.",
            "The ethernet cable in the box is two metres long.",
            "IPv6 is supported on most broadband lines.",
            "The admin session ends after ten minutes of inactivity.",
            "Scheduled reboots can be set for any night of the week.",
            "The router stores up to thirty days of traffic history.",
            "The router's serial number is printed under the stand.",
            "Client isolation can be turned on for each band.",
            "The device list can be sorted by name or by traffic.",
            "MAC filtering allows only listed devices to join.",
            "The admin page works in all current browsers.",
            "Parental profiles can cover several devices at once.",
            "Email alerts can report new devices on the network.",
            "The router keeps working if the app is removed.",
            "Band steering moves devices to the less busy band.",
            "Custom DNS servers can be set for the whole network.",
            "The status page shows the speed of the broadband line.",
            "Remote management is off unless enabled by the owner.",
            "LED brightness can be set from the app.",
            "Port triggering is available for older games.",
            "The factory settings are printed on a card in the box."])

# Three women are named in every copy; who led the survey (whom "she" refers to) differs.
LEADS = ("Dr. Elena Park", "Dr. Amara Okafor", "Dr. Ingrid Solberg", "Dr. Lucia Moreno", "Dr. Hana Sato",
         "Dr. Claire Dubois", "Dr. Priya Raman", "Dr. Nadia Haddad")
SURVEY = Genre(
    kind="pronoun",
    opening=["Field report: the summer survey of the Karsa valley.",
             "The survey was led by {lead}, with {second} and {third} as field scientists."],
    values=rotating_cast(LEADS),
    lead=["The team camped at the foot of the glacier for five weeks.",
          "Tom Reiss kept the camp supplied and handled the radio."],
    asked=[("She mapped the northern ridge in three days using a handheld laser scanner.",
            "What did {lead} map with the laser scanner?"),
           ("Mark Daley took water samples from the lake while the survey's leader measured the ice thickness.",
            "What did {lead} measure while water samples were taken?"),
           ("She concluded that the glacier had retreated almost two kilometres since the last survey.",
            "What did {lead} conclude about the glacier's retreat?"),
           ("Her photographs of the moraine were later published by the geological society.",
            "Where were {lead}'s photographs of the moraine published?"),
           ("She recommended a permanent weather station at the upper camp.",
            "What did {lead} recommend building at the upper camp?")],
    filler=["The valley is reached by a two-day walk from the nearest road.",
            "Supplies were carried up by mules from the village.",
            "The weather was dry for most of July.",
            "A storm in the third week kept everyone in the tents for two days.",
            "The lake freezes over again by late September.",
            "Marmots were seen near the camp every morning.",
            "The river crossing was only safe before noon.",
            "Satellite images from earlier decades were used for comparison.",
            "The camp's solar panels charged the instruments each day.",
            "Rock samples were labelled and packed in numbered crates.",
            "The upper camp sat at three thousand metres.",
            "Night temperatures dropped below freezing even in summer.",
            "Local herders shared their knowledge of the old paths.",
            "The meltwater stream doubled in size during warm afternoons.",
            "A drone flight was cancelled because of strong winds.",
            "Food supplies ran short in the final week.",
            "The radio link to the village worked only from the ridge.",
            "Old survey markers from the 1970s were found intact.",
            "Moss and lichen covered the lower boulders.",
            "The route to the pass was marked with cairns.",
            "Ice axes and crampons were needed above the lake.",
            "Evenings were spent entering data into the field laptops.",
            "A helicopter brought fuel halfway through the season.",
            "The glacier's surface was cut by deep crevasses.",
            "Wild flowers covered the meadows below the camp.",
            "Fog often filled the valley until mid morning.",
            "The team's cook came from the village at the valley mouth.",
            "Boots and tents were dried by the stove after rain.",
            "A rock fall closed the eastern path for a week.",
            "The survey equipment weighed almost two hundred kilograms.",
            "Streams were crossed on a rope line fixed in June.",
            "Temperature loggers were buried at four depths.",
            "The last group left the valley at the end of August.",
            "Maps from the survey were digitised over the winter.",
            "Funding came from a university grant and a private foundation.",
            "The glacier's snout was marked with painted stones.",
            "A spare tent was kept at the lower camp for emergencies.",
            "Soil cores were taken from three terraces.",
            "The expedition's doctor treated two sprained ankles.",
            "Water boiled at a lower temperature at the upper camp.",
            "Old photographs were matched to their viewpoints.",
            "A shepherd's hut served as a store for the fuel.",
            "The team used a small inflatable boat on the lake.",
            "Insects were caught in traps along the stream.",
            "The pass was crossed twice to reach the eastern slope.",
            "Each evening the weather was recorded by hand.",
            "Fresh bread was brought up from the village once a week.",
            "The survey's GPS base station ran without a break.",
            "Avalanche debris was found below the western face.",
            "Thin ice on the lake made crossings dangerous by August."])

PARKING = Genre(
    kind="condition",
    opening=["Harlow Borough Council: parking rules, part three.", "The rules in this part apply only to {group}."],
    values=[{"group": g} for g in ("residents of the old town", "delivery drivers", "taxi operators",
                                   "blue badge holders", "electric vehicle owners", "market traders",
                                   "coach companies", "motorcycle riders")],
    lead=["Other road users should read the general rules in part one.",
          "Wardens patrol the town centre from seven in the morning."],
    asked=[("A permit under these rules costs forty pounds a year and must be shown on the windscreen.",
            "How much is a parking permit for {group}?"),
           ("Vehicles covered here may stop on double yellow lines for up to twenty minutes.",
            "Can {group} stop on double yellow lines, and for how long?"),
           ("Permits in this part are renewed online each April.",
            "When do {group} renew their parking permits?"),
           ("Anyone covered by this part who is caught without a permit pays a fine of seventy pounds.",
            "What is the fine for {group} parking without a permit?"),
           ("Under these rules, the Market Street car park is free before nine in the morning.",
            "Is Market Street car park free for {group} in the morning?")],
    filler=["Parking bays are marked with white lines and signs.",
            "Pay and display machines take cards and coins.",
            "The multi-storey car park opens at six.",
            "Loading bays are signed at both ends.",
            "Wheel clamps are no longer used in the borough.",
            "Appeals against a penalty are made within twenty-eight days.",
            "Signs at the start of a zone show its hours.",
            "Bus lanes operate from seven to seven on weekdays.",
            "Cycle lanes must be kept clear at all times.",
            "The park and ride runs every fifteen minutes.",
            "Street cleaning closes some roads on Tuesday mornings.",
            "Footways may not be used for parking.",
            "Charging points are shown on the council's map.",
            "Event days bring temporary restrictions near the stadium.",
            "A map of all car parks is available at the library.",
            "Penalty notices are left on the windscreen.",
            "Roadworks may suspend bays at short notice.",
            "School zones are enforced by camera.",
            "Visitor vouchers can be bought in books of ten.",
            "The council reviews its tariffs every two years.",
            "Abandoned vehicles are reported through the website.",
            "Private car parks set their own conditions.",
            "Grass verges are protected by a bylaw.",
            "Night parking is free in most streets after eight.",
            "The town centre is a twenty mile an hour zone.",
            "Contraflow lanes are marked in red.",
            "Holiday weekends follow the Sunday timetable.",
            "Wardens carry handheld devices that photograph each vehicle.",
            "Height barriers protect the underground car park.",
            "Residents may comment on new schemes during consultations.",
            "Spaces for car clubs are reserved with a green sign.",
            "The annual report on enforcement is published each June.",
            "Bridge Street is closed to traffic on market days.",
            "Taxis may wait only at marked ranks.",
            "Yellow zigzags outside schools mean no stopping at all.",
            "Motorists may not wait in marked ambulance bays.",
            "Street trading licences are issued separately.",
            "Disabled bays are reserved at all times.",
            "Permits cannot be transferred to another vehicle.",
            "Penalty charges are halved if paid within fourteen days.",
            "Coaches may drop off at the bus station only.",
            "Parking suspensions are signed at least a day ahead.",
            "Car park charges are displayed at every entrance.",
            "The council publishes a list of all controlled zones.",
            "Vehicles over three tonnes need special permission at night.",
            "A blue sign marks each permit holder's bay.",
            "Parking on pavements is an offence in the borough.",
            "Residents' visitors may use vouchers for up to four hours.",
            "The market square is closed to vehicles after nine.",
            "Temporary permits are issued for house moves."])

GENRES = {"handbook": HANDBOOK, "hotel": HOTEL, "release-notes": RELEASE, "field-report": SURVEY,
          "parking-rules": PARKING}

# More pronoun families (near only), so the form rests on 24 asked sentences rather than five: in each, three people
# of one gender are named in every copy, and who leads differs; the asked sentences say only "she", "he", "her" or
# "his", and each question names the copy's lead.
CONDUCTORS = ("Maria Lindqvist", "Sofia Brandt", "Julia Hartmann", "Elena Vasquez", "Clara Moretti", "Ingrid Holm",
              "Naomi Adler", "Teresa Kowalczyk")
ORCHESTRA = Genre(
    kind="pronoun",
    opening=["Programme notes: the spring concert of the Linden Hall Orchestra.",
             "Tonight's concert is conducted by {lead}; {second} and {third} are the soloists."],
    values=rotating_cast(CONDUCTORS),
    lead=["The orchestra was founded in 1962 by a group of music teachers.",
          "Tickets for the autumn season go on sale in June."],
    asked=[("She chose the opening overture herself after hearing it in Vienna.",
            "Which piece did {lead} choose after hearing it in Vienna?"),
           ("Her first rehearsal with the orchestra lasted almost five hours.",
            "How long was {lead}'s first rehearsal with the orchestra?"),
           ("The players say she never raises her voice, even when a passage goes badly.",
            "Does {lead} shout at the players when a passage goes badly?"),
           ("She asked the brass section to sit further back for this concert.",
            "Where did {lead} ask the brass section to sit?"),
           ("After the interval she will talk briefly about the symphony's history.",
            "What will {lead} talk about after the interval?"),
           ("Critics praised her slow tempo in the second movement last season.",
            "What did critics praise in {lead}'s conducting last season?"),
           ("She studied the cello for years before she ever held a baton.",
            "Which instrument did {lead} study before conducting?"),
           ("Next year she takes the orchestra on its first tour of Japan.",
            "Where will {lead} take the orchestra on tour next year?")],
    filler=["The hall seats eleven hundred people.", "Latecomers are admitted during the applause.",
            "The bar opens an hour before the concert.", "Photography is not allowed during the performance.",
            "The programme lasts about two hours with one interval.", "Cloakroom tickets are free of charge.",
            "Hearing loops are fitted in the stalls.", "The orchestra's shop sells recordings in the foyer."])

COUNSEL = ("Thomas Whitfield", "Daniel Okoro", "Samuel Brennan", "Jonas Keller", "Rafael Ortega", "Peter Lindholm",
           "Arjun Mehta", "Victor Laurent")
CASE_FILE = Genre(
    kind="pronoun",
    opening=["Case file 2291: Hollis and others against the Marlow Water Company.",
             "The claim is led by {lead}, with {second} and {third} as junior counsel."],
    values=rotating_cast(COUNSEL),
    lead=["The claim concerns the flooding of six houses on Mill Lane in 2019.",
          "The water company denies that its pipes caused the damage."],
    asked=[("He filed the appeal two days before the court's deadline.",
            "When did {lead} file the appeal?"),
           ("His argument rests on the company's own inspection reports.",
            "What does {lead}'s argument rest on?"),
           ("He interviewed every household on the lane in the first month.",
            "Whom did {lead} interview in the first month of the claim?"),
           ("The judge granted him an extra week to gather expert evidence.",
            "How much extra time did the judge give {lead}?"),
           ("He believes the case will settle before it reaches trial.",
            "Does {lead} expect the case to settle?"),
           ("His fee is paid only if the claim succeeds.",
            "When is {lead} paid for the claim?"),
           ("He has asked for the company's maintenance records going back to 2010.",
            "Which records has {lead} asked the water company for?"),
           ("In court he will call two engineers as witnesses.",
            "Whom will {lead} call as witnesses in court?")],
    filler=["Hearings take place at the county court in Exeter.",
            "The claimants meet their lawyers every second Tuesday.",
            "All letters to the court are copied to the claimants.",
            "The insurers of two houses have joined the claim.",
            "Photographs of the flooding were taken by a neighbour.",
            "A surveyor valued the damage at ninety thousand pounds.",
            "The lane has flooded twice more since the claim began.",
            "Press enquiries go to the firm's office manager."])

WARD_MANAGERS = ("Grace Mwangi", "Helen Novak", "Ruth Castillo", "Irene Walsh", "Yuki Tanaka", "Fatima Rahman",
                 "Olga Petrova", "Anna Kowalski")
WARD = Genre(
    kind="pronoun",
    opening=["Ward 7 handover notes, week 12.",
             "The ward is managed by {lead}; {second} and {third} are the senior nurses on the day shift."],
    values=rotating_cast(WARD_MANAGERS),
    lead=["The ward has twenty-four beds for patients recovering from surgery.",
          "Visiting hours are from two until eight."],
    asked=[("She moved the medication round to half past seven to keep it clear of the doctors' rounds.",
            "Why did {lead} move the medication round?"),
           ("Her new checklist for discharges has cut waiting times by an hour.",
            "What has {lead}'s discharge checklist done to waiting times?"),
           ("She wants every patient weighed on admission from next month.",
            "What does {lead} want done for every patient on admission?"),
           ("Families can phone her directly with complaints.",
            "Can families call {lead} directly with a complaint?"),
           ("She trained the student nurses on the new infusion pumps last week.",
            "Whom did {lead} train on the new infusion pumps?"),
           ("Her request for two more night staff is with the hospital board.",
            "What has {lead} asked the hospital board for?"),
           ("She found the broken fridge lock during her night check.",
            "What did {lead} find during the night check?"),
           ("The rota for the holidays will be posted by her on Friday.",
            "When will {lead} post the holiday rota?")],
    filler=["Hand gel stations are at every bay entrance.", "The kitchen serves lunch at twelve.",
            "Spare linen is kept in the cupboard by bay C.", "Patients may bring their own pillows.",
            "The day room has a television and books.", "Fire doors must never be wedged open.",
            "Physiotherapists visit each morning.", "Parking permits for families are sold at reception."])

PRONOUN_GENRES = {"field-report": SURVEY, "concert": ORCHESTRA, "case-file": CASE_FILE, "ward": WARD}


def fill(template: str, values: dict) -> str:
    """A template with the copy's values; `{x_lower}` is value `x` with a lower-case first letter."""
    extended = dict(values)
    for key, value in values.items():
        extended[f"{key}_lower"] = value[0].lower() + value[1:]
    return template.format(**extended)


NEAR_FILLER = 8  # filler lines interleaved with the asked ones in every copy (near: ~250 tokens)


LONG_REPEATS = 4  # long: the far filler four times over (~1,500 tokens before the asked lines, ~2,000 in all)


def family(name: str, genre: Genre, distance: str) -> list:
    """8 copies of the genre's document; queries ask every asked line, kind `<reference form>/<distance>`.

    Near: opening, lead, then the asked lines interleaved with the first filler lines. Far: the rest of the filler
    comes between the lead and that block, so the asked lines start more than 512 tokens in. Long: that filler
    `LONG_REPEATS` times, so a document spans four 512-token windows and its asked lines sit in the last ones (the
    set that chooses how windows overlap).
    """
    documents = []
    for number, values in enumerate(genre.values):
        lines = [fill(line, values) for line in genre.opening]
        evidence = list(range(len(lines)))
        lines += genre.lead
        if distance in ("far", "long"):
            lines += genre.filler[NEAR_FILLER:] * (LONG_REPEATS if distance == "long" else 1)
        near_filler = genre.filler[:NEAR_FILLER]
        queries = []
        for k, (sentence, question) in enumerate(genre.asked):
            lines += near_filler[k * len(near_filler) // len(genre.asked):(k + 1) * len(near_filler) // len(genre.asked)]
            queries.append((fill(question, values), [len(lines)], evidence, f"{genre.kind}/{distance}"))
            lines.append(fill(sentence, values))
        paragraphs = [[i] for i in range(len(lines))]
        documents.append(lines_document(f"{name}/{distance}/{number}", "handwritten", f"{name}/{distance}",
                                        lines, paragraphs, queries))
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path,
                        help="folder to write handwritten-near/, -far/, -long/ and -pronoun/ into")
    args = parser.parse_args()
    for name, documents in sets().items():
        write_set(args.output / name, documents)


def sets() -> dict[str, list]:
    """The hand-written validation sets: `handwritten-near`, `handwritten-far` and `handwritten-long` (the five
    genres, one reference form each), and `handwritten-pronoun` (the pronoun families, near: 4 families, 29 asked sentences)."""
    return {**{f"handwritten-{distance}": [d for name, genre in GENRES.items() for d in family(name, genre, distance)]
               for distance in ("near", "far", "long")},
            "handwritten-pronoun": [d for name, genre in PRONOUN_GENRES.items() for d in family(name, genre, "near")]}


if __name__ == "__main__":
    main()
