"""The knowledge base of twenty questions: everyday objects and their attributes, one object per line.

    name[, synonym ...] | kinds | size class | tags

`kinds` are names from `vocabulary.KINDS` (spaces written as `_`); a sub-kind implies its parent. The size
class indexes `vocabulary.SIZE_CLASSES`. Tags: bare words are flags (`living`, `edible`, ...; `raw` marks a
natural thing that is not alive, such as a fruit), and `m:` materials, `c:` typical colours, `h:` parts
("has"), `u:` uses, `p:` places, `a:` abilities take comma-separated lists (spaces written as `_`).
"""

OBJECT_TABLE = """
dog | animal mammal | 3 | living pet carnivore h:legs,tail,fur,teeth c:brown,black,white p:living_room,park,street,farm a:swim,jump
cat | animal mammal | 2 | living pet carnivore h:legs,tail,fur,whiskers,claws c:black,white,orange,gray p:living_room,bedroom,street,farm a:climb,jump
horse | animal mammal | 5 | living h:legs,tail,hooves,mane c:brown,black,white p:farm u:riding,transport a:jump,swim
cow | animal mammal | 5 | living h:legs,tail,hooves,horns,spots c:black,white,brown p:farm
pig | animal mammal | 4 | living h:legs,tail,hooves c:pink p:farm
sheep | animal mammal | 4 | living h:legs,tail,hooves,wool c:white p:farm,mountains
goat | animal mammal | 4 | living h:legs,tail,hooves,horns c:white,brown p:farm,mountains a:climb,jump
rabbit, bunny | animal mammal | 2 | living pet h:legs,tail,fur,whiskers c:white,brown,gray p:garden,forest,farm a:jump
mouse | animal mammal | 1 | living wild h:legs,tail,fur,whiskers c:gray,brown p:kitchen,farm,forest a:climb
hamster | animal mammal | 1 | living pet h:legs,fur,whiskers c:brown,white,gold p:bedroom,living_room a:climb
squirrel | animal mammal | 2 | living wild h:legs,tail,fur,claws c:gray,brown,red p:park,forest,garden a:climb,jump
elephant | animal mammal | 6 | living wild h:legs,tail,trunk,tusks c:gray p:savanna,jungle,zoo a:swim
giraffe | animal mammal | 6 | living wild h:legs,tail,horns,spots,long_neck c:yellow,brown p:savanna,zoo
lion | animal mammal | 4 | living wild carnivore dangerous h:legs,tail,fur,claws,mane,teeth c:yellow,brown p:savanna,zoo a:jump
tiger | animal mammal | 4 | living wild carnivore dangerous h:legs,tail,fur,claws,whiskers,stripes,teeth c:orange,black,white p:jungle,forest,zoo a:swim,jump
bear | animal mammal | 4 | living wild dangerous h:legs,fur,claws,teeth c:brown,black p:forest,mountains,zoo a:swim,climb
polar bear | animal mammal | 4 | living wild dangerous carnivore h:legs,fur,claws,teeth c:white p:arctic,zoo a:swim
monkey | animal mammal | 3 | living wild h:legs,tail,fur c:brown p:jungle,zoo a:climb,jump
zebra | animal mammal | 5 | living wild h:legs,tail,hooves,mane,stripes c:black,white p:savanna,zoo
kangaroo | animal mammal | 4 | living wild h:legs,tail,fur,pouch c:brown,gray p:desert,zoo a:jump
whale | animal mammal | 6 | living wild h:tail,fins c:blue,gray p:ocean a:swim
dolphin | animal mammal | 4 | living wild carnivore h:tail,fins,teeth c:gray p:ocean,zoo a:swim,jump
bat | animal mammal | 1 | living wild nocturnal h:wings,fur,claws c:black,brown p:cave,forest a:fly
deer | animal mammal | 4 | living wild h:legs,tail,hooves,antlers,fur c:brown p:forest a:jump,swim
fox | animal mammal | 3 | living wild nocturnal carnivore h:legs,tail,fur,whiskers c:orange,red p:forest,farm,garden a:jump
wolf | animal mammal | 3 | living wild dangerous carnivore h:legs,tail,fur,claws,teeth c:gray p:forest,mountains a:swim
camel | animal mammal | 5 | living h:legs,tail,hooves,hump c:brown,yellow p:desert,zoo u:riding,transport
hippopotamus, hippo | animal mammal | 5 | living wild dangerous h:legs,tail,teeth c:gray p:river,savanna,zoo a:swim
chicken, hen | animal bird | 2 | living edible h:legs,wings,feathers,beak c:white,brown p:farm a:lay_eggs
duck | animal bird | 2 | living h:legs,wings,feathers,beak c:white,brown,green p:river,farm,park a:fly,swim,lay_eggs
eagle | animal bird | 3 | living wild carnivore h:legs,wings,feathers,beak,claws c:brown,white p:mountains,sky a:fly,lay_eggs
owl | animal bird | 2 | living wild nocturnal carnivore h:legs,wings,feathers,beak,claws c:brown,white p:forest a:fly,lay_eggs
penguin | animal bird | 3 | living wild carnivore h:legs,wings,feathers,beak c:black,white p:antarctic,zoo a:swim,lay_eggs
parrot | animal bird | 2 | living pet h:legs,wings,feathers,beak,claws c:green,red,blue,yellow p:jungle,living_room a:fly,talk,lay_eggs
pigeon | animal bird | 1 | living h:legs,wings,feathers,beak c:gray p:street,park a:fly,lay_eggs
ostrich | animal bird | 5 | living wild h:legs,wings,feathers,beak,long_neck c:black,white p:savanna,zoo a:lay_eggs
flamingo | animal bird | 4 | living wild h:legs,wings,feathers,beak,long_neck c:pink p:river,zoo a:fly,lay_eggs
goldfish | animal fish | 1 | living pet h:fins,tail,scales c:orange,gold p:living_room,river a:swim,lay_eggs
shark | animal fish | 5 | living wild dangerous carnivore h:fins,tail,teeth c:gray p:ocean a:swim
salmon | animal fish | 3 | living edible h:fins,tail,scales c:pink,silver p:river,ocean a:swim,jump,lay_eggs
snake | animal reptile | 3 | living wild dangerous carnivore long h:scales c:green,brown,black p:forest,desert,jungle a:swim,climb,lay_eggs
turtle | animal reptile | 2 | living pet h:legs,tail,shell,scales c:green,brown p:river,ocean,beach a:swim,lay_eggs
crocodile | animal reptile | 5 | living wild dangerous carnivore h:legs,tail,scales,teeth c:green p:river,jungle a:swim,lay_eggs
lizard | animal reptile | 1 | living wild h:legs,tail,scales c:green,brown p:desert,garden a:climb,lay_eggs
frog | animal amphibian | 1 | living wild h:legs c:green p:river,garden,jungle a:jump,swim,lay_eggs
ant | animal insect | 0 | living h:legs,antennae c:black,red p:garden,forest,kitchen a:climb
bee | animal insect | 0 | living h:legs,wings,antennae,stinger,stripes c:yellow,black p:garden,farm a:fly,sting
butterfly | animal insect | 1 | living h:legs,wings,antennae c:orange,yellow,blue,white p:garden,park a:fly,lay_eggs
mosquito | animal insect | 0 | living dangerous h:legs,wings c:black p:garden,forest,river a:fly,lay_eggs
ladybug, ladybird | animal insect | 0 | living round h:legs,wings,antennae,spots c:red,black p:garden a:fly,lay_eggs
spider | animal arachnid | 0 | living carnivore h:legs c:black,brown p:garden,living_room,cave a:climb,lay_eggs
crab | animal crustacean | 2 | living edible h:legs,claws,shell c:red,orange p:ocean,beach a:swim
octopus | animal mollusk | 3 | living edible h:tentacles c:red,orange p:ocean a:swim,lay_eggs
snail | animal mollusk | 0 | living h:shell,antennae c:brown p:garden a:climb,lay_eggs
earthworm, worm | animal | 1 | living long c:pink,brown p:garden,farm
jellyfish | animal | 2 | living dangerous transparent h:tentacles c:pink,white p:ocean,beach a:swim,sting
apple | food fruit | 1 | raw edible sweet round h:seeds,stem c:red,green p:kitchen,farm a:grow_on_trees
banana | food fruit | 1 | raw edible sweet long h:peel c:yellow p:kitchen,jungle a:grow_on_trees
orange | food fruit | 1 | raw edible sweet round h:peel,seeds c:orange p:kitchen a:grow_on_trees
lemon | food fruit | 1 | raw edible sour h:peel,seeds c:yellow p:kitchen a:grow_on_trees
strawberry | food fruit | 1 | raw edible sweet h:seeds,leaves c:red p:garden,farm
grape | food fruit | 0 | raw edible sweet round h:seeds c:green,purple p:farm,kitchen
watermelon | food fruit | 3 | raw edible sweet round h:seeds c:green,red p:farm
pineapple | food fruit | 2 | raw edible sweet sour h:leaves c:yellow,brown p:farm
cherry | food fruit | 0 | raw edible sweet round h:seeds,stem c:red a:grow_on_trees p:garden,farm
pear | food fruit | 1 | raw edible sweet h:seeds,stem c:green,yellow p:kitchen a:grow_on_trees
peach | food fruit | 1 | raw edible sweet round soft h:seeds c:orange,pink a:grow_on_trees p:kitchen,farm
mango | food fruit | 1 | raw edible sweet h:seeds,peel c:orange,yellow,green p:jungle a:grow_on_trees
coconut | food fruit | 2 | raw edible round h:shell c:brown,white p:beach,jungle a:grow_on_trees
blueberry | food fruit | 0 | raw edible sweet round c:blue p:garden,forest
carrot | food vegetable | 1 | raw edible long h:leaves c:orange p:garden,farm,kitchen a:grow_underground
potato | food vegetable | 1 | raw edible hot c:brown p:farm,kitchen a:grow_underground
tomato | food vegetable | 1 | raw edible round h:seeds c:red p:garden,kitchen
onion | food vegetable | 1 | raw edible round spicy c:white,purple p:garden,kitchen a:grow_underground
broccoli | food vegetable | 2 | raw edible h:stem c:green p:garden,kitchen
lettuce | food vegetable | 2 | raw edible h:leaves c:green p:garden,kitchen
corn | food vegetable | 2 | raw edible sweet long h:leaves c:yellow p:farm
cucumber | food vegetable | 2 | raw edible long h:seeds c:green p:garden,kitchen
pumpkin | food vegetable | 3 | raw edible round h:seeds,stem c:orange p:farm,garden
garlic | food vegetable | 1 | raw edible spicy c:white p:kitchen a:grow_underground
chili pepper | food vegetable | 1 | raw edible spicy long h:seeds,stem c:red,green p:garden,kitchen
mushroom | food vegetable fungus | 1 | living edible h:stem c:white,brown p:forest
milk | drink dairy food | 2 | edible liquid cold c:white p:kitchen,farm,shop
cheese | dairy food | 1 | edible salty h:holes c:yellow p:kitchen,shop
butter | dairy food | 1 | edible soft salty c:yellow p:kitchen
yogurt | dairy food | 1 | edible soft cold sour c:white p:kitchen,shop
ice cream | dairy dessert food | 1 | edible sweet cold soft c:white,brown,pink p:kitchen,shop,beach
egg | food | 1 | raw edible round h:shell c:white,brown p:kitchen,farm
bread | baked_good food | 2 | edible soft c:brown p:kitchen,shop
cake | baked_good dessert food | 2 | edible sweet soft round c:brown,white,pink p:kitchen,restaurant
cookie, biscuit | baked_good dessert food | 1 | edible sweet round flat c:brown p:kitchen
pizza | baked_good food | 2 | edible hot salty round flat c:red,yellow p:restaurant,kitchen
honey | food | 1 | raw edible sweet liquid c:yellow,gold p:kitchen,farm
rice | food | 0 | raw edible hot c:white p:kitchen,farm
spaghetti, pasta | food | 2 | edible hot long c:yellow p:kitchen,restaurant
sandwich | food | 2 | edible c:brown,white p:kitchen,restaurant
hamburger, burger | food | 2 | edible hot salty round c:brown p:restaurant
hot dog | food | 2 | edible hot salty long c:red,brown p:restaurant,street
chocolate | dessert food | 1 | edible sweet c:brown p:kitchen,shop
popcorn | food | 0 | edible salty hot c:white,yellow p:cinema
soup | food | 2 | edible liquid hot salty p:kitchen,restaurant
coffee | drink | 1 | edible liquid hot c:brown,black p:kitchen,office,restaurant
tea | drink | 1 | edible liquid hot h:leaves c:brown,green p:kitchen,restaurant
orange juice | drink | 1 | edible liquid cold sweet sour c:orange p:kitchen,shop
oak tree, oak | plant tree | 6 | living h:leaves,bark,roots,trunk m:wood c:green,brown p:forest,park
pine tree, pine | plant tree | 6 | living h:needles,bark,roots,trunk m:wood c:green p:forest,mountains
palm tree, palm | plant tree | 6 | living h:leaves,bark,roots,trunk m:wood c:green p:beach,jungle,desert
rose | plant flower | 1 | living h:petals,thorns,stem,leaves,roots c:red,pink,white,yellow p:garden
sunflower | plant flower | 4 | living h:petals,stem,leaves,seeds,roots c:yellow p:garden,farm
tulip | plant flower | 2 | living h:petals,stem,leaves,roots c:red,yellow,pink p:garden
cactus | plant | 3 | living sharp h:spines,roots c:green p:desert,living_room
hammer | tool | 2 | m:metal,wood h:handle c:silver,brown u:building,fixing p:garage
screwdriver | tool | 2 | long m:metal,plastic h:handle c:silver u:fixing,building p:garage
wrench, spanner | tool | 2 | m:metal c:silver u:fixing p:garage
saw | tool | 3 | sharp m:metal,wood h:handle,blade,teeth c:silver u:cutting,building p:garage
drill | tool power_tool | 2 | electric loud m:metal,plastic h:handle,battery u:building,fixing p:garage
pliers | tool | 1 | m:metal h:handle c:silver u:fixing p:garage
axe | tool | 3 | sharp dangerous m:metal,wood h:handle,blade u:cutting p:forest,garage
shovel, spade | tool garden_tool | 4 | m:metal,wood h:handle,blade u:digging,gardening p:garden,garage
rake | tool garden_tool | 4 | m:metal,wood h:handle,prongs u:gardening,cleaning p:garden,garage
ladder | tool | 4 | m:metal,wood u:building,fixing p:garage
tape measure | tool | 1 | m:metal,plastic c:yellow u:measuring p:garage
paintbrush | tool | 2 | m:wood h:handle,bristles u:painting p:garage,classroom
wheelbarrow | tool garden_tool | 4 | m:metal h:wheels,handle u:carrying,gardening p:garden,farm
lawn mower | tool garden_tool power_tool | 4 | loud m:metal,plastic h:wheels,engine,blade,handle u:gardening,cutting p:garden,garage
flashlight, torch | tool | 2 | electric m:metal,plastic h:battery,buttons,lens c:black u:lighting p:garage,bedroom
needle | tool | 0 | sharp long m:metal c:silver u:sewing p:bedroom,living_room
scissors | tool stationery | 1 | sharp m:metal,plastic h:handle,blade u:cutting p:classroom,office,kitchen
car | vehicle | 5 | m:metal,glass h:wheels,engine,doors,windows c:red,blue,black,white,gray u:transport p:street,garage
bus | vehicle | 6 | m:metal,glass h:wheels,engine,doors,windows c:yellow,red u:transport p:street
truck, lorry | vehicle | 6 | loud m:metal h:wheels,engine,doors,windows u:transport,carrying p:street
bicycle, bike | vehicle | 4 | m:metal,rubber h:wheels,pedals,handlebars u:transport,riding,sports p:street,park,garage
motorcycle, motorbike | vehicle | 4 | loud m:metal h:wheels,engine,handlebars u:transport,riding p:street,garage
train | vehicle | 6 | loud long m:metal h:wheels,engine,doors,windows u:transport p:station
airplane, plane, aeroplane | vehicle aircraft | 6 | loud m:metal h:wings,wheels,engine,doors,windows c:white u:transport p:sky a:fly
helicopter | vehicle aircraft | 6 | loud m:metal h:engine,blade,doors,windows u:transport p:sky a:fly
sailboat, sailing boat | vehicle boat | 5 | m:wood,fabric h:sails c:white u:transport,sports p:ocean,river
ship | vehicle boat | 6 | m:metal h:engine,windows u:transport,carrying p:ocean
canoe, kayak | vehicle boat | 5 | long m:wood,plastic u:transport,sports p:river
submarine | vehicle boat | 6 | long m:metal h:engine u:transport p:ocean a:swim
tractor | vehicle | 5 | loud m:metal h:wheels,engine c:green,red u:farming p:farm
skateboard | vehicle sports_equipment toy | 2 | flat m:wood,plastic h:wheels u:sports,playing,riding p:park,street
scooter | vehicle toy | 3 | m:metal,plastic h:wheels,handlebars u:transport,playing,riding p:street,park
hot air balloon | vehicle aircraft | 6 | round m:fabric u:transport,sports p:sky a:fly
rocket | vehicle aircraft | 6 | loud dangerous long m:metal h:engine c:white u:transport p:sky a:fly
ambulance | vehicle | 6 | loud m:metal h:wheels,engine,doors,windows,siren c:white,red u:transport p:street,hospital
fire truck, fire engine | vehicle | 6 | loud m:metal h:wheels,engine,doors,windows,siren c:red u:protection p:street
taxi, cab | vehicle | 5 | m:metal,glass h:wheels,engine,doors,windows c:yellow,black u:transport p:street
chair | furniture | 3 | m:wood,plastic,metal h:legs u:sitting p:kitchen,living_room,office,classroom
table | furniture | 4 | flat m:wood,metal h:legs u:eating p:kitchen,living_room,restaurant
sofa, couch | furniture | 4 | soft m:fabric,leather h:cushions,legs u:sitting,sleeping p:living_room
bed | furniture | 4 | soft m:wood,fabric h:legs u:sleeping p:bedroom
desk | furniture | 4 | flat m:wood,metal h:legs,drawers u:writing,working p:office,bedroom,classroom
bookshelf, bookcase | furniture | 4 | m:wood h:shelves u:storage p:living_room,office,bedroom,classroom
wardrobe, closet | furniture | 4 | m:wood h:doors,shelves u:storage p:bedroom
stool | furniture | 3 | m:wood,metal h:legs u:sitting p:kitchen,restaurant
bench | furniture | 4 | long m:wood,metal h:legs u:sitting p:park,street,garden
armchair | furniture | 4 | soft m:fabric,leather h:cushions,legs u:sitting p:living_room
crib, cot | furniture | 4 | m:wood h:legs u:sleeping p:bedroom
dresser, chest of drawers | furniture | 4 | m:wood h:drawers u:storage p:bedroom
rocking chair | furniture | 3 | m:wood u:sitting p:living_room,garden
hammock | furniture | 4 | soft m:fabric u:sleeping,sitting p:garden,beach
t-shirt, shirt | clothing | 2 | soft wearable m:fabric h:sleeves p:bedroom,shop
trousers, pants | clothing | 3 | wearable m:fabric h:legs,pockets,zipper p:bedroom,shop
jeans | clothing | 3 | wearable m:fabric h:legs,pockets,zipper,buttons c:blue p:bedroom,shop
dress | clothing | 3 | soft wearable m:fabric p:bedroom,shop
skirt | clothing | 2 | soft wearable m:fabric h:zipper p:bedroom
jacket | clothing | 3 | wearable m:fabric,leather h:sleeves,pockets,zipper u:keeping_warm p:bedroom
coat | clothing | 3 | wearable m:wool,fabric h:sleeves,pockets,buttons u:keeping_warm p:bedroom
sweater, jumper | clothing | 2 | soft wearable m:wool h:sleeves u:keeping_warm p:bedroom
hat | clothing headwear | 2 | wearable m:fabric h:brim u:protection p:bedroom,beach
baseball cap, cap | clothing headwear sports_equipment | 2 | wearable m:fabric h:brim p:bedroom,park
scarf | clothing accessory | 2 | soft long wearable m:wool,fabric u:keeping_warm p:bedroom
gloves, mittens | clothing | 1 | soft wearable m:wool,leather,fabric u:keeping_warm,protection p:bedroom
socks | clothing | 1 | soft wearable m:fabric,wool p:bedroom
sneakers, trainers, running shoes | clothing footwear sports_equipment | 2 | wearable m:fabric,rubber h:laces u:sports p:bedroom
boots | clothing footwear | 2 | wearable m:leather,rubber h:laces u:protection p:bedroom
sandals | clothing footwear | 2 | flat wearable m:leather,rubber h:straps p:beach,bedroom
belt | clothing accessory | 3 | long wearable m:leather h:buckle c:black,brown p:bedroom
necktie, tie | clothing accessory | 2 | long wearable m:fabric p:bedroom,office
swimsuit | clothing | 2 | wearable m:fabric u:swimming p:beach
pajamas, pyjamas | clothing | 3 | soft wearable m:fabric h:sleeves,legs u:sleeping p:bedroom
guitar | musical_instrument string_instrument | 3 | m:wood h:strings c:brown u:music p:living_room,bedroom
violin | musical_instrument string_instrument | 2 | m:wood h:strings c:brown u:music p:classroom,living_room
cello | musical_instrument string_instrument | 4 | m:wood h:strings c:brown u:music p:classroom
harp | musical_instrument string_instrument | 4 | m:wood h:strings c:gold,brown u:music p:living_room
banjo | musical_instrument string_instrument | 3 | round m:wood,metal h:strings u:music p:living_room,farm
piano | musical_instrument keyboard_instrument | 4 | loud m:wood h:keys,strings,legs,pedals c:black,white u:music p:living_room,classroom
drum | musical_instrument percussion_instrument | 3 | loud round m:wood,plastic u:music p:classroom,garage
xylophone | musical_instrument percussion_instrument | 3 | m:wood,metal h:keys u:music p:classroom
tambourine | musical_instrument percussion_instrument | 2 | round m:wood,metal u:music p:classroom,beach
flute | musical_instrument wind_instrument woodwind_instrument | 3 | long m:metal h:holes,keys c:silver u:music p:classroom,bedroom
clarinet | musical_instrument wind_instrument woodwind_instrument | 3 | long m:wood h:holes,keys c:black u:music p:classroom
saxophone | musical_instrument wind_instrument woodwind_instrument | 3 | loud m:metal h:keys c:gold u:music p:restaurant,street
trumpet | musical_instrument wind_instrument brass_instrument | 2 | loud m:metal c:gold u:music p:classroom,street
trombone | musical_instrument wind_instrument brass_instrument | 3 | loud long m:metal c:gold u:music p:classroom,street
harmonica | musical_instrument wind_instrument | 1 | m:metal,plastic h:holes c:silver u:music p:bedroom,street
accordion | musical_instrument wind_instrument keyboard_instrument | 3 | loud m:wood,metal h:keys,buttons,straps u:music p:street,restaurant
bagpipes | musical_instrument wind_instrument | 3 | loud m:wood,fabric u:music p:street,mountains
spoon | kitchenware utensil | 1 | m:metal h:handle c:silver u:eating p:kitchen,restaurant
fork | kitchenware utensil | 1 | m:metal h:handle,prongs c:silver u:eating p:kitchen,restaurant
knife | kitchenware utensil | 2 | sharp dangerous m:metal h:handle,blade c:silver u:cutting,eating p:kitchen,restaurant
plate | kitchenware | 2 | flat round fragile m:ceramic c:white u:eating p:kitchen,restaurant
bowl | kitchenware container | 2 | round m:ceramic,plastic u:eating p:kitchen,restaurant
mug | kitchenware container | 1 | fragile m:ceramic h:handle u:drinking p:kitchen,office
wine glass | kitchenware container | 2 | fragile transparent m:glass h:stem u:drinking p:kitchen,restaurant
frying pan, pan | kitchenware | 3 | hot round m:metal h:handle c:black u:cooking p:kitchen,restaurant
saucepan, pot | kitchenware container | 2 | hot m:metal h:handle,lid c:silver u:cooking p:kitchen,restaurant
kettle | kitchenware container | 2 | hot m:metal h:handle,lid,spout u:cooking,drinking p:kitchen
teapot | kitchenware container | 2 | hot fragile m:ceramic h:handle,lid,spout u:drinking p:kitchen,restaurant
spatula | kitchenware utensil | 2 | flat m:plastic,metal h:handle u:cooking p:kitchen
whisk | kitchenware utensil | 2 | m:metal h:handle c:silver u:cooking p:kitchen
ladle | kitchenware utensil | 2 | m:metal h:handle c:silver u:cooking,eating p:kitchen,restaurant
cutting board, chopping board | kitchenware | 2 | flat m:wood,plastic u:cutting,cooking p:kitchen
rolling pin | kitchenware utensil | 2 | long round m:wood u:cooking p:kitchen
chopsticks | kitchenware utensil | 2 | long m:wood,plastic u:eating p:kitchen,restaurant
bottle | container | 2 | m:plastic,glass h:lid u:drinking,storage p:kitchen,shop
jar | container | 1 | fragile transparent m:glass h:lid u:storage p:kitchen,shop
refrigerator, fridge | appliance | 4 | electric cold m:metal,plastic h:doors,shelves c:white,silver u:storage,cooling p:kitchen
microwave, microwave oven | appliance | 3 | electric hot m:metal,plastic,glass h:doors,buttons u:cooking,heating p:kitchen,office
oven, stove | appliance | 4 | electric hot m:metal h:doors u:cooking,heating p:kitchen,restaurant
toaster | appliance | 2 | electric hot m:metal,plastic c:silver u:cooking,heating p:kitchen
blender | appliance | 2 | electric loud m:plastic,glass h:blade,lid,buttons u:cooking p:kitchen
washing machine | appliance | 4 | electric loud m:metal,plastic h:doors,buttons c:white u:washing,cleaning p:bathroom
dishwasher | appliance | 4 | electric m:metal,plastic h:doors,shelves c:white,silver u:washing,cleaning p:kitchen
vacuum cleaner, vacuum | appliance | 3 | electric loud m:plastic h:wheels,handle,cord u:cleaning p:living_room,bedroom
television, tv | electronic_device | 3 | electric flat m:plastic,glass h:screen,cord c:black u:entertainment p:living_room,bedroom
laptop, computer | electronic_device | 2 | electric m:plastic,metal h:screen,keys,battery c:silver,gray,black u:working,writing,communication,entertainment p:office,bedroom,classroom
smartphone, phone, mobile phone, cell phone | electronic_device | 1 | electric m:glass,metal h:screen,battery,lens c:black u:communication,photography,entertainment p:office,bedroom,living_room,street
camera | electronic_device | 1 | electric m:plastic,metal h:lens,buttons,battery c:black u:photography p:street,beach,bedroom
radio | electronic_device | 2 | electric m:plastic h:buttons c:black u:entertainment,music p:kitchen,living_room
headphones | electronic_device | 2 | electric wearable m:plastic h:cord c:black u:music,entertainment p:bedroom,office
alarm clock | electronic_device | 1 | electric loud m:plastic h:buttons u:telling_time p:bedroom
lamp | appliance | 3 | electric hot m:metal,plastic,glass h:cord u:lighting p:living_room,bedroom,office
fan | appliance | 3 | electric m:plastic,metal h:blade,cord,buttons u:cooling p:bedroom,office,living_room
hair dryer | appliance | 2 | electric hot loud m:plastic h:handle,cord u:drying,grooming p:bathroom
remote control, remote | electronic_device | 1 | electric m:plastic h:buttons,battery c:black u:entertainment p:living_room
calculator | electronic_device | 1 | electric m:plastic h:buttons,screen,battery u:calculating p:office,classroom
printer | electronic_device | 3 | electric m:plastic h:buttons,cord c:white,black u:printing p:office
computer mouse | electronic_device | 1 | electric m:plastic h:buttons c:black,white u:working p:office
light bulb, lightbulb | household_item | 1 | electric hot fragile round m:glass,metal u:lighting p:living_room,bedroom,kitchen
pen | stationery | 1 | long m:plastic,metal h:lid c:blue,black u:writing p:office,classroom
pencil | stationery | 1 | long m:wood c:yellow u:writing,drawing p:office,classroom
eraser, rubber eraser | stationery | 0 | soft m:rubber c:pink,white u:cleaning p:classroom,office
notebook | stationery | 2 | flat m:paper h:pages u:writing p:classroom,office
book | stationery | 2 | m:paper h:pages u:reading,entertainment p:living_room,classroom,bedroom,office
stapler | stationery | 1 | m:metal,plastic c:black u:attaching p:office,classroom
ruler | stationery | 2 | flat long m:plastic,wood u:measuring p:classroom,office
paper clip, paperclip | stationery | 0 | m:metal c:silver u:attaching p:office
envelope | stationery | 2 | flat m:paper c:white u:communication p:office
crayon | stationery | 0 | long m:wax c:red,blue,yellow,green u:drawing p:classroom
backpack, rucksack, schoolbag | container | 3 | wearable m:fabric h:straps,zipper,pockets u:carrying p:classroom
globe | stationery | 2 | round m:plastic c:blue p:classroom,office
toothbrush | household_item | 2 | long m:plastic h:bristles,handle u:cleaning p:bathroom
toothpaste | household_item | 1 | soft m:plastic h:lid c:white u:cleaning p:bathroom
soap | household_item | 1 | u:cleaning,washing p:bathroom,kitchen
towel | household_item | 3 | soft m:fabric u:drying p:bathroom,beach
comb | household_item | 1 | flat m:plastic h:teeth u:grooming p:bathroom
hairbrush | household_item | 2 | m:plastic,wood h:bristles,handle u:grooming p:bathroom,bedroom
mirror | household_item | 3 | flat fragile m:glass u:grooming p:bathroom,bedroom
pillow | household_item | 2 | soft m:fabric c:white u:sleeping p:bedroom
blanket | household_item | 4 | soft m:fabric,wool u:sleeping,keeping_warm p:bedroom,living_room
candle | household_item | 1 | hot m:wax c:white u:lighting,decoration p:living_room
umbrella | household_item | 3 | long m:fabric,metal h:handle c:black u:protection p:street
key | household_item | 1 | m:metal h:teeth c:silver,gold u:opening p:living_room,street,office
wallet | household_item container | 1 | flat m:leather c:black,brown u:carrying,storage p:bedroom,shop
wristwatch, watch | accessory | 1 | wearable m:metal,leather,glass h:straps,buckle,battery u:telling_time p:bedroom,office,street
eyeglasses, glasses, spectacles | accessory | 1 | wearable fragile m:glass,metal,plastic h:lens u:seeing p:bedroom,office,classroom
coin | household_item | 1 | round flat m:metal c:silver,gold u:buying p:shop,street
broom | household_item | 4 | long m:wood,plastic h:handle,bristles u:cleaning p:kitchen,garage
bucket, pail | household_item container | 2 | m:plastic,metal h:handle u:carrying,cleaning p:garage,garden,beach
sponge | household_item | 1 | soft m:plastic c:yellow u:cleaning,washing p:kitchen,bathroom
vase | household_item container | 2 | fragile m:glass,ceramic u:decoration p:living_room
basket | container | 2 | m:wood h:handle u:carrying,storage p:kitchen,shop
suitcase | container | 3 | m:plastic,fabric,leather h:handle,wheels,zipper u:carrying p:bedroom
trash can, bin, garbage can | household_item container | 3 | m:plastic,metal h:lid u:storage p:kitchen,street,office
rug, carpet | household_item | 4 | soft flat m:fabric,wool u:decoration p:living_room,bedroom
toilet | household_item | 3 | m:ceramic h:lid c:white u:washing p:bathroom
bathtub, bath | household_item | 4 | m:ceramic,metal c:white u:washing p:bathroom
soccer ball, football | sports_equipment ball toy | 2 | round m:leather,rubber c:black,white u:sports,playing p:park a:bounce,roll
basketball | sports_equipment ball | 2 | round m:rubber c:orange u:sports p:park,classroom a:bounce,roll
tennis ball | sports_equipment ball | 1 | round soft m:rubber,fabric c:yellow,green u:sports p:park a:bounce,roll
bowling ball | sports_equipment ball | 2 | round m:plastic h:holes c:black,blue u:sports a:roll p:shop
baseball bat | sports_equipment | 3 | long m:wood,metal u:sports p:park
tennis racket | sports_equipment | 3 | m:metal,plastic h:handle,strings u:sports p:park
golf club | sports_equipment | 3 | long m:metal h:handle u:sports p:garage,park
skis | sports_equipment | 4 | long flat m:wood,plastic u:sports p:mountains
kite | toy | 3 | m:fabric,paper,plastic h:tail,strings u:playing p:park,beach,sky a:fly
doll | toy | 2 | m:plastic,fabric h:legs u:playing p:bedroom
teddy bear | toy | 2 | soft m:fabric h:legs,fur c:brown u:playing p:bedroom
yo-yo | toy | 1 | round m:plastic,wood h:strings u:playing a:roll p:bedroom,classroom,park
jigsaw puzzle, puzzle | toy | 2 | flat m:paper u:playing p:living_room,classroom
frisbee | toy sports_equipment | 2 | round flat m:plastic u:playing,sports p:park,beach a:fly
balloon | toy | 1 | round fragile m:rubber u:playing,decoration a:fly,bounce p:living_room,park
jump rope, skipping rope | toy sports_equipment | 3 | long m:plastic h:handle u:sports,playing p:park,classroom
dice, die | toy | 0 | m:plastic h:spots c:white u:playing p:living_room
roller skates | sports_equipment toy | 2 | wearable m:plastic,leather h:wheels,laces u:sports,playing p:park,street a:roll
"""
